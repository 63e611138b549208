import pytest
import torch

from botorch_dp.kernel_derivatives import KernelDerivatives, derivative_kernel_for
from helpers import make_kernel

KERNELS = ["rbf", "matern52", "poly2", "rq"]


def _fd_cross(kernel, theta, X, h):
    """Central differences of k(theta, x_i) in theta: d x n."""
    d = theta.shape[-1]
    cols = []
    for j in range(d):
        e = torch.zeros_like(theta)
        e[j] = h
        kp = kernel(theta[None] + e, X).to_dense()[0]
        km = kernel(theta[None] - e, X).to_dense()[0]
        cols.append((kp - km) / (2 * h))
    return torch.stack(cols)


@pytest.mark.parametrize("name", KERNELS)
def test_cross_and_prior_agree_across_methods(name, dtype):
    d = 3
    torch.manual_seed(0)
    kernel = make_kernel(name, d, torch.float64)
    theta = torch.rand(d, dtype=torch.float64)
    X = torch.rand(6, d, dtype=torch.float64)
    methods = ["closed_form", "derivative_kernel", "autograd"]
    if name == "matern52":
        methods = ["closed_form", "derivative_kernel"]
    if name == "rq":
        methods = ["autograd"]
    # finite differences in float64 are the independent reference
    fd_cross = _fd_cross(kernel, theta, X, 1e-5)
    h = 1e-4
    ref = KernelDerivatives(kernel, methods[0])
    fd_prior = torch.stack(
        [
            (ref.cross(theta, (theta + h * e)[None]) - ref.cross(theta, (theta - h * e)[None]))[:, 0]
            / (2 * h)
            for e in torch.eye(d, dtype=torch.float64)
        ],
        dim=-1,
    )
    tol = 1e-6 if dtype == torch.float64 else 1e-4
    kernel = kernel.to(dtype)
    for m in methods:
        kd = KernelDerivatives(kernel, m)
        assert kd.method == m
        cross = kd.cross(theta.to(dtype), X.to(dtype))
        prior = kd.prior(theta.to(dtype))
        assert cross.shape == (d, 6) and cross.dtype == dtype
        assert prior.shape == (d, d)
        torch.testing.assert_close(cross.double(), fd_cross, rtol=tol, atol=tol)
        torch.testing.assert_close(prior.double(), fd_prior, rtol=1e-5 if dtype == torch.float64 else 1e-3, atol=tol)
        torch.testing.assert_close(prior, prior.transpose(-1, -2))


def test_batched_theta_and_X():
    d = 4
    kernel = make_kernel("rbf", d)
    kd_t = KernelDerivatives(kernel, "derivative_kernel")
    kd_a = KernelDerivatives(kernel, "autograd")
    kd_c = KernelDerivatives(kernel, "closed_form")
    theta = torch.rand(5, d, dtype=torch.float64)
    X = torch.rand(5, 3, d, dtype=torch.float64)
    c_t, c_a = kd_t.cross(theta, X), kd_a.cross(theta, X)
    assert c_t.shape == (5, d, 3)
    torch.testing.assert_close(c_t, c_a)
    torch.testing.assert_close(c_t, kd_c.cross(theta, X))
    # broadcasting one theta against a batch of candidate sets
    torch.testing.assert_close(kd_c.cross(theta[0], X), kd_t.cross(theta[0], X))
    for i in range(5):
        torch.testing.assert_close(c_t[i], kd_t.cross(theta[i], X[i]))
    assert kd_t.prior(theta).shape == (5, d, d)


def test_rbf_closed_form():
    """∇k∇ᵀ(θ, θ) = s · diag(1/ℓ²) for a scaled RBF kernel."""
    d = 3
    kernel = make_kernel("rbf", d)
    ls = kernel.base_kernel.lengthscale.detach().reshape(-1)
    expected = kernel.outputscale.detach() * torch.diag(ls**-2)
    for m in ("closed_form", "derivative_kernel", "autograd"):
        torch.testing.assert_close(
            KernelDerivatives(kernel, m).prior(torch.rand(d, dtype=torch.float64)), expected
        )


def test_method_selection_and_refusals():
    d = 2
    assert derivative_kernel_for(make_kernel("rq", d)) is None
    assert KernelDerivatives(make_kernel("rq", d)).method == "autograd"
    assert KernelDerivatives(make_kernel("rbf", d)).method == "closed_form"
    assert KernelDerivatives(make_kernel("poly2", d)).method == "closed_form"
    with pytest.raises(ValueError, match="No GPyTorch derivative kernel"):
        KernelDerivatives(make_kernel("rq", d), "derivative_kernel")
    with pytest.raises(ValueError, match="Matérn"):
        KernelDerivatives(make_kernel("matern52", d), "autograd")
    with pytest.raises(ValueError, match="Unknown method"):
        KernelDerivatives(make_kernel("rbf", d), "magic")


@pytest.mark.parametrize("name", ["rbf", "matern52", "poly2"])
def test_closed_form_gradient_in_X_is_finite_at_theta(name):
    """Candidates may coincide with θ: the cross term and its X-gradient stay finite."""
    d = 3
    kd = KernelDerivatives(make_kernel(name, d), "closed_form")
    theta = torch.full((d,), 0.4, dtype=torch.float64)
    X = theta.expand(1, 2, d).clone().requires_grad_(True)
    out = kd.cross(theta, X)
    (g,) = torch.autograd.grad(out.sum(), X)
    assert torch.isfinite(out).all() and torch.isfinite(g).all()
    if name != "poly2":
        assert out.abs().max() == 0  # stationary kernels: zero slope at coincident points
