r"""qGradientInformation's criterion (botorch_dp/acquisition.py): the value equals a brute-force
trace reduction, adding points never increases the trace, a finite-difference stencil drives
it to zero, its gradient in X matches finite differences, and BoTorch's optimizers improve
it. (Its use as a BoTorch drop-in is in test_acquisition_botorch.py.)"""

import pytest
import torch
from botorch.generation.gen import gen_candidates_scipy, gen_candidates_torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.kernel_derivatives import KernelDerivatives
from tests.helpers import make_kernel, make_model


def _brute_force_reduction(kernel, D, Z, theta, noise, jitter):
    """tr Σ_D(θ) − tr Σ_{D∪Z}(θ) by dense solves on the augmented data (no factor reuse)."""
    kd = KernelDerivatives(kernel)

    def trace(P):
        G = kd.cross(theta, P)
        K = kernel(P).to_dense() + max(noise, jitter) * torch.eye(P.shape[0], dtype=P.dtype)
        return kd.prior(theta).trace() - (G * torch.linalg.solve(K, G.T).T).sum()

    return trace(D) - trace(torch.cat([D, Z]))


@pytest.mark.parametrize("noise", [0.0, 0.02])
@pytest.mark.parametrize("name", ["rbf", "matern52", "poly2"])
@pytest.mark.parametrize("q,m", [(1, 0), (3, 0), (1, 2), (3, 2)])
def test_value_equals_brute_force(name, noise, q, m):
    d, N = 3, 8
    g = torch.Generator().manual_seed(1)
    D = torch.rand(N, d, generator=g, dtype=torch.float64)
    kernel = make_kernel(name, d)
    gp = GradientGP(D, kernel, noise)
    theta = torch.full((d,), 0.5, dtype=torch.float64)
    X_pending = torch.rand(m, d, generator=g, dtype=torch.float64) if m else None
    acqf = qGradientInformation(gp, theta, X_pending=X_pending)
    X = torch.rand(5, q, d, generator=g, dtype=torch.float64)
    values = acqf(X)
    assert values.shape == (5,)
    for b in range(5):
        Z = X[b] if X_pending is None else torch.cat([X[b], X_pending])
        expected = _brute_force_reduction(kernel, D, Z, theta, noise, gp.jitter)
        assert torch.isclose(values[b], expected, rtol=1e-8, atol=1e-12), (values[b], expected)


def test_acqf_from_singletaskgp_and_float32(dtype):
    d, N = 2, 6
    X = torch.rand(N, d, dtype=dtype)
    Y = X.sum(-1, keepdim=True)
    model = make_model(make_kernel("rbf", d, dtype), X, Y, 1e-3)
    theta = torch.full((d,), 0.5, dtype=dtype)
    acqf = qGradientInformation(model, theta)
    gp64 = GradientGP(X.double(), make_kernel("rbf", d), float(model.likelihood.noise))
    Z = torch.rand(4, 2, d, dtype=dtype)
    ref = gp64.trace_reduction(theta.double(), Z.double())
    tol = 1e-10 if dtype == torch.float64 else 1e-3
    torch.testing.assert_close(acqf(Z).double(), ref, rtol=tol, atol=tol)
    assert acqf(Z).dtype == dtype


def test_adding_points_never_increases_trace():
    d = 4
    kernel = make_kernel("rbf", d)
    theta = torch.full((d,), 0.5, dtype=torch.float64)
    g = torch.Generator().manual_seed(3)
    gp = GradientGP(torch.empty(0, d, dtype=torch.float64), kernel, 1e-4)
    traces = [gp.posterior_trace(theta)]
    for _ in range(12):
        gp = gp.condition_on(theta + 0.3 * (torch.rand(2, d, generator=g, dtype=torch.float64) - 0.5))
        traces.append(gp.posterior_trace(theta))
    traces = torch.stack(traces)
    assert (traces[1:] <= traces[:-1] + 1e-12).all()
    assert (traces >= -1e-10).all()


@pytest.mark.parametrize("name", ["rbf", "matern52"])
def test_fd_stencil_drives_trace_to_zero(name):
    """d+1 noise-free points θ, θ + h e_j carry the gradient: the trace nearly vanishes."""
    d = 5
    kernel = make_kernel(name, d)
    theta = torch.full((d,), 0.3, dtype=torch.float64)
    h = 1e-3
    stencil = torch.cat([theta[None], theta + h * torch.eye(d, dtype=torch.float64)])
    gp = GradientGP(torch.empty(0, d, dtype=torch.float64), kernel, 0.0, jitter=1e-12)
    prior_trace = gp.posterior_trace(theta)
    acqf = qGradientInformation(gp, theta)
    reduction = acqf(stencil[None])
    post_trace = gp.condition_on(stencil).posterior_trace(theta)
    assert post_trace < 1e-3 * prior_trace
    torch.testing.assert_close(prior_trace - reduction, post_trace.reshape(1), rtol=0, atol=1e-6)
    # a random stencil of the same size is far less informative
    far = theta + 2.0 * torch.rand(d + 1, d, dtype=torch.float64)
    assert gp.condition_on(far).posterior_trace(theta) > 100 * post_trace


def test_gradient_wrt_X_matches_finite_differences():
    d, N = 3, 7
    D = torch.rand(N, d, dtype=torch.float64)
    acqf = qGradientInformation(GradientGP(D, make_kernel("rbf", d), 0.01), torch.rand(d, dtype=torch.float64))
    X = torch.rand(2, 3, d, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(acqf(X).sum(), X)
    h = 1e-6
    fd = torch.zeros_like(X)
    with torch.no_grad():
        for idx in torch.cartesian_prod(torch.arange(2), torch.arange(3), torch.arange(d)):
            e = torch.zeros_like(X)
            e[tuple(idx)] = h
            fd[tuple(idx)] = (acqf(X + e).sum() - acqf(X - e).sum()) / (2 * h)
    torch.testing.assert_close(grad, fd, rtol=1e-5, atol=1e-7)


def _setup(d=4, N=10):
    g = torch.Generator().manual_seed(0)
    D = torch.rand(N, d, generator=g, dtype=torch.float64)
    model = make_model(make_kernel("rbf", d), D, D.sum(-1, keepdim=True), 1e-3)
    theta = torch.full((d,), 0.5, dtype=torch.float64)
    bounds = torch.stack([theta - 0.25, theta + 0.25])
    return qGradientInformation(model, theta), bounds


@pytest.mark.parametrize("q,sequential", [(1, False), (4, False), (4, True)])
def test_optimize_acqf_beats_random_points(q, sequential):
    acqf, bounds = _setup()
    torch.manual_seed(0)
    cand, _ = optimize_acqf(acqf, bounds, q=q, num_restarts=4, raw_samples=64, sequential=sequential)
    assert cand.shape == (q, 4)
    assert (cand >= bounds[0] - 1e-9).all() and (cand <= bounds[1] + 1e-9).all()
    assert acqf.X_pending is None  # optimize_acqf restores it after a sequential run
    random = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(256, q, 4, dtype=torch.float64)
    with torch.no_grad():
        assert acqf(cand[None]) >= acqf(random).max()


@pytest.mark.parametrize("gen", [gen_candidates_scipy, gen_candidates_torch])
def test_gen_candidates(gen):
    acqf, bounds = _setup()
    torch.manual_seed(0)
    ics = gen_batch_initial_conditions(acqf, bounds, q=2, num_restarts=3, raw_samples=32)
    with torch.no_grad():
        start = acqf(ics)
    options = {"maxiter": 50} if gen is gen_candidates_torch else {}
    cand, vals = gen(ics, acqf, lower_bounds=bounds[0], upper_bounds=bounds[1], options=options)
    assert cand.shape == ics.shape
    assert (cand >= bounds[0] - 1e-9).all() and (cand <= bounds[1] + 1e-9).all()
    assert (vals >= start - 1e-9).all() and (vals > start + 1e-6).any()


def test_theta_shape_checked():
    acqf, _ = _setup()
    with pytest.raises(ValueError, match="theta has"):
        qGradientInformation(acqf.gradient_gp, torch.zeros(3, dtype=torch.float64))
    X = torch.rand(5, 3, dtype=torch.float64)
    model = SingleTaskGP(X, X.sum(-1, keepdim=True), input_transform=Normalize(3)).eval()
    with pytest.raises(ValueError, match="theta has 2 entries"):
        qGradientInformation(model, torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize("gradient", ["closed_form", "autograd"])
@pytest.mark.parametrize("source", ["gradient_gp", "botorch_model", "projected"])
def test_value_and_gradient_create_every_tensor_on_the_data_device(source, gradient):
    # tests.helpers.DeviceAudit: a tensor made without the data's device lands on "meta" (issue 33, item 3)
    from tests.helpers import DeviceAudit

    d = 3
    g = torch.Generator().manual_seed(3)
    D = torch.rand(7, d, generator=g, dtype=torch.float64)
    kernel = make_kernel("rbf", d)
    theta = torch.full((d,), 0.5, dtype=torch.float64)
    X = torch.rand(4, 2, d, generator=g, dtype=torch.float64, requires_grad=True)
    pending = torch.rand(2, d, generator=g, dtype=torch.float64)
    model = (
        make_model(kernel, D, D.sum(-1, keepdim=True), 1e-3)
        if source == "botorch_model"
        else GradientGP(D, kernel, 1e-3)
    )
    basis = torch.eye(d, 2, dtype=torch.float64) if source == "projected" else None
    if basis is not None and gradient == "closed_form":
        gradient = "auto"  # the projected acquisition has no closed form: "auto" takes autograd
    audit = DeviceAudit()
    with audit:
        acqf = qGradientInformation(model, theta, X_pending=pending, basis=basis, gradient=gradient)
        value = acqf(X)
        (grad,) = torch.autograd.grad(value.sum(), X)
    assert audit.off_device == [] and audit.host_moves == [], (audit.off_device, audit.host_moves)
    assert {dt for dts in audit.linalg_dtypes.values() for dt in dts} == {torch.float64}
    plain = qGradientInformation(model, theta, X_pending=pending, basis=basis, gradient=gradient)(X)
    assert torch.equal(value, plain) and value.device == grad.device == theta.device
