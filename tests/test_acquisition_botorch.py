r"""qGradientInformation as a BoTorch drop-in (botorch_dp/acquisition.py): built from BoTorch
models with input transforms, composite kernels, several outputs or a model list, checked
against BoTorch's own posterior by finite differences and against the derivative kernel by
brute force; refused, naming the alternative, where it does not apply; rebuilt when the
model's hyperparameters change; built by the registered input constructor as Ax does; its
closed-form gradient equal to autograd's. (The criterion itself is in test_acquisition.py.)"""

import warnings

import pytest
import torch
from botorch.acquisition.input_constructors import get_acqf_input_constructor
from botorch.acquisition.objective import ScalarizedPosteriorTransform
from botorch.exceptions.warnings import InputDataWarning
from botorch.models import ModelListGP, MultiTaskGP, SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.models.transforms.input import ChainedInputTransform, InputStandardize, Warp
from botorch.optim import optimize_acqf
from botorch.utils.datasets import SupervisedDataset
from gpytorch.kernels import RBFKernelGrad
from gpytorch.means import ZeroMean

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from tests.helpers import make_kernel, make_model
from tests.test_kernel_derivatives import composite_kernel

F64 = torch.float64
LO, HI = 2.0, 7.0  # the raw inputs live far from [0, 1], so a transform matters


def _raw_data(d, N, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = LO + (HI - LO) * torch.rand(N, d, generator=g, dtype=F64)
    return X, torch.sin(X).sum(-1, keepdim=True)


def _transform(name, d):
    if name == "normalize_learned":
        return Normalize(d)
    if name == "normalize_fixed":
        return Normalize(d, bounds=torch.tensor([[1.0] * d, [8.0] * d], dtype=F64))
    if name == "standardize":
        return InputStandardize(d)
    if name == "normalize_warp":  # non-affine: J depends on θ
        warp = Warp(d=d, indices=[0, 2]).to(F64)
        warp.initialize(
            concentration0=torch.tensor([0.7, 1.8], dtype=F64), concentration1=torch.tensor([1.6, 0.8], dtype=F64)
        )
        return ChainedInputTransform(
            normalize=Normalize(d, bounds=torch.tensor([[1.0] * d, [8.0] * d], dtype=F64)), warp=warp
        )
    raise ValueError(name)


def _gp(X, Y, kernel, noise=1e-3, **kwargs):
    model = SingleTaskGP(X, Y, covar_module=kernel, mean_module=ZeroMean(), **{"outcome_transform": None, **kwargs})
    model.likelihood.noise = noise
    return model.to(F64).eval()


def _fd_gradient_covariance(model, theta, h=1e-4, posterior_transform=None):
    """Cov(∇_x f(θ) | D) by central differences of BoTorch's own posterior covariance."""
    d = theta.shape[-1]
    E = torch.eye(d, dtype=F64)
    P = torch.cat([theta + h * E, theta - h * E])
    Dm = torch.cat([E, -E], dim=1) / (2 * h)
    with torch.no_grad():
        cov = model.posterior(P, posterior_transform=posterior_transform).mvn.covariance_matrix
    return Dm @ cov @ Dm.T


def _fd_reduction(model, theta, Z, noise=1e-3):
    """tr Σ_D(θ) − tr Σ_{D∪Z}(θ) from BoTorch: condition the model on Z, difference its posterior."""
    before = _fd_gradient_covariance(model, theta).trace()
    with torch.no_grad():
        model.posterior(theta[None])  # BoTorch builds its caches before conditioning
        cond = model.condition_on_observations(
            Z, torch.zeros(Z.shape[0], 1, dtype=F64), noise=torch.full((Z.shape[0], 1), noise, dtype=F64)
        )
    return before - _fd_gradient_covariance(cond, theta).trace()


@pytest.mark.parametrize("tf", ["normalize_learned", "normalize_fixed", "standardize", "normalize_warp"])
def test_input_transforms_chain_rule_against_botorch(tf):
    """θ, candidates and the criterion live in the raw inputs: checked against BoTorch's posterior."""
    d = 3
    X, Y = _raw_data(d, 10)
    model = _gp(X, Y, make_kernel("rbf", d), input_transform=_transform(tf, d))
    theta = torch.tensor([4.0, 5.5, 3.2], dtype=F64)
    acqf = qGradientInformation(model, theta)
    fd_cov = _fd_gradient_covariance(model, theta)
    torch.testing.assert_close(acqf.current_trace, fd_cov.trace(), rtol=1e-5, atol=1e-9)
    g = torch.Generator().manual_seed(2)
    Z = theta + 0.8 * (torch.rand(3, 2, d, generator=g, dtype=F64) - 0.5)
    values = acqf(Z)
    assert (values > 0).all()
    for b in range(3):
        torch.testing.assert_close(values[b], _fd_reduction(model, theta, Z[b]), rtol=1e-5, atol=1e-9)
    # without the chain rule (the gradient in the model's own inputs) the value differs
    assert not torch.isclose(
        acqf.current_trace, acqf.gradient_gp.posterior_trace(model.transform_inputs(theta[None])[0]), rtol=1e-2
    )


def test_normalize_against_derivative_kernel_brute_force():
    """Brute force in the normalized space with GPyTorch's RBFKernelGrad, then J = diag(1/range)."""
    d, noise = 3, 1e-3
    X, Y = _raw_data(d, 9, seed=5)
    kernel = make_kernel("rbf", d)
    model = _gp(X, Y, kernel, noise, input_transform=Normalize(d))
    theta = torch.tensor([3.5, 4.0, 6.0], dtype=F64)
    acqf = qGradientInformation(model, theta)
    lo, rng = X.min(0).values, X.max(0).values - X.min(0).values  # the learned bounds
    twin = RBFKernelGrad(ard_num_dims=d).to(F64)
    twin.lengthscale = kernel.base_kernel.lengthscale.detach()
    s = kernel.outputscale.detach()

    def trace(P):  # P: raw points; the gradient covariance at θ in raw coordinates
        Pz, tz = (P - lo) / rng, (theta - lo) / rng
        joint = s * twin(torch.cat([tz[None], Pz])).to_dense()  # per point [f, ∂f/∂z_1..d]
        n = P.shape[0]
        idx_f = (d + 1) * (1 + torch.arange(n))
        G = joint[1 : d + 1][:, idx_f]  # Cov(∇_z f(θ), f(P)): d x n
        K = joint[idx_f][:, idx_f] + noise * torch.eye(n, dtype=F64)
        cov_z = joint[1 : d + 1, 1 : d + 1] - G @ torch.linalg.solve(K, G.T)
        return (cov_z / (rng[:, None] * rng[None, :])).trace()

    Z = theta + 0.5 * (torch.rand(4, 2, d, generator=torch.Generator().manual_seed(1), dtype=F64) - 0.5)
    torch.testing.assert_close(acqf.current_trace, trace(X), rtol=1e-7, atol=1e-12)
    expected = torch.stack([trace(X) - trace(torch.cat([X, z])) for z in Z])
    torch.testing.assert_close(acqf(Z), expected, rtol=1e-6, atol=1e-12)
    # and its gradient in the raw candidates agrees with finite differences
    Zg = Z[:1].clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(acqf(Zg).sum(), Zg)
    h = 1e-6
    fd = torch.stack(
        [(acqf(Z[:1] + h * e) - acqf(Z[:1] - h * e)) / (2 * h) for e in torch.eye(2 * d, dtype=F64).reshape(-1, 2, d)]
    )
    torch.testing.assert_close(grad.reshape(-1), fd.reshape(-1), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name", ["matern32", "rbf*poly", "rbf+poly", "additive_matern_active", "matern32*rbf"])
def test_kernels_against_botorch(name):
    d = 3
    g = torch.Generator().manual_seed(3)
    X = torch.rand(8, d, generator=g, dtype=F64)
    model = _gp(X, X.sum(-1, keepdim=True), composite_kernel(name, d))
    theta = torch.tensor([0.4, 0.55, 0.3], dtype=F64)
    acqf = qGradientInformation(model, theta)
    has_matern32 = name in ("matern32", "additive_matern_active", "matern32*rbf")
    rtol = 2e-3 if has_matern32 else 1e-5  # Matérn-3/2's |r|³ term: O(h) differences
    torch.testing.assert_close(acqf.current_trace, _fd_gradient_covariance(model, theta).trace(), rtol=rtol, atol=1e-9)
    Z = theta + 0.4 * (torch.rand(2, 2, d, generator=g, dtype=F64) - 0.5)
    values = acqf(Z)
    for b in range(2):
        torch.testing.assert_close(values[b], _fd_reduction(model, theta, Z[b]), rtol=rtol, atol=1e-8)


def test_matern12_refused_with_reason():
    X, Y = _raw_data(2, 5)
    model = _gp(X, Y, composite_kernel("matern12", 2))
    with pytest.raises(ValueError, match="not differentiable"):
        qGradientInformation(model, X[0])


def test_multi_output_and_model_list_sum_the_traces():
    """Outputs are independent GPs: α = Σ_k w_k² α_k, the trace of Cov(∇ Σ_k w_k f_k)."""
    from gpytorch.kernels import RBFKernel, ScaleKernel

    d = 3
    X, Y1 = _raw_data(d, 9)
    Y = torch.cat([Y1, X[:, :1] ** 2], dim=-1)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=d, batch_shape=torch.Size([2])), batch_shape=torch.Size([2])).to(F64)
    kernel.base_kernel.lengthscale = torch.tensor([[[0.5, 0.8, 1.1]], [[1.0, 0.6, 0.9]]], dtype=F64)
    kernel.outputscale = torch.tensor([1.3, 0.4], dtype=F64)
    bounds = torch.tensor([[1.0] * d, [8.0] * d], dtype=F64)
    multi = _gp(X, Y, kernel, input_transform=Normalize(d, bounds=bounds), outcome_transform=Standardize(m=2))
    singles = [
        _gp(
            X,
            Y[:, k : k + 1],
            kernel[k],
            input_transform=Normalize(d, bounds=bounds),
            outcome_transform=Standardize(m=1),
        )
        for k in range(2)
    ]
    theta = torch.tensor([4.0, 5.0, 3.0], dtype=F64)
    Z = theta + 0.5 * (torch.rand(3, 2, d, generator=torch.Generator().manual_seed(0), dtype=F64) - 0.5)
    parts = torch.stack([qGradientInformation(m, theta)(Z) for m in singles])
    torch.testing.assert_close(qGradientInformation(multi, theta)(Z), parts.sum(0))
    w = torch.tensor([0.3, -2.0], dtype=F64)
    weighted = qGradientInformation(multi, theta, posterior_transform=ScalarizedPosteriorTransform(w))
    torch.testing.assert_close(weighted(Z), (w.pow(2)[:, None] * parts).sum(0))

    # a ModelListGP with a different transform per model, against BoTorch's scalarized posterior
    listed = ModelListGP(singles[0], _gp(X, Y[:, 1:], make_kernel("matern52", d), input_transform=Normalize(d)))
    acqf = qGradientInformation(listed, theta, posterior_transform=ScalarizedPosteriorTransform(w))
    fd = _fd_gradient_covariance(listed, theta, posterior_transform=ScalarizedPosteriorTransform(w))
    torch.testing.assert_close(acqf.current_trace, fd.trace(), rtol=1e-5, atol=1e-9)
    torch.testing.assert_close(
        qGradientInformation(listed, theta)(Z),
        qGradientInformation(listed.models[0], theta)(Z) + qGradientInformation(listed.models[1], theta)(Z),
    )
    with pytest.raises(ValueError, match="2 outputs"):
        qGradientInformation(listed, theta, posterior_transform=ScalarizedPosteriorTransform(w[:1]))
    with pytest.raises(ValueError, match="2 outputs"):
        acqf.gradient_gp  # noqa: B018


def test_batched_and_multitask_models_refused_naming_the_alternative():
    d = 2
    X = torch.rand(6, d, generator=torch.Generator().manual_seed(0), dtype=F64)
    Y = X.sin().sum(-1, keepdim=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputDataWarning)  # unscaled toy data; only the refusal matters
        batched = SingleTaskGP(torch.stack([X, X + 0.1]), torch.stack([Y, Y]), outcome_transform=None).to(F64)
    with pytest.raises(NotImplementedError, match="one acquisition .* per batch element"):
        qGradientInformation(batched, X[0])
    task = torch.cat([X, (torch.arange(6) % 2).to(F64)[:, None]], dim=-1)
    with pytest.raises(NotImplementedError, match="ModelListGP"):
        qGradientInformation(MultiTaskGP(task, Y, task_feature=-1), task[0])
    with pytest.raises(NotImplementedError, match="ScalarizedPosteriorTransform"):
        from botorch.acquisition.objective import ExpectationPosteriorTransform

        qGradientInformation(
            _gp(X, Y, make_kernel("rbf", d)), X[0], posterior_transform=ExpectationPosteriorTransform(n_w=2)
        )


def test_changed_hyperparameters_are_recomputed():
    d = 3
    X, Y = _raw_data(d, 8)
    kernel = make_kernel("rbf", d)
    model = _gp(X, Y, kernel, input_transform=Normalize(d))
    theta = torch.tensor([4.0, 5.0, 3.0], dtype=F64)
    acqf = qGradientInformation(model, theta)
    Z = theta + 0.5 * (torch.rand(5, 2, d, generator=torch.Generator().manual_seed(0), dtype=F64) - 0.5)
    before = acqf(Z)
    kernel.base_kernel.lengthscale = torch.tensor([0.2, 0.3, 0.25], dtype=F64)  # after construction
    after = acqf(Z)
    assert not torch.allclose(before, after, rtol=1e-3)
    torch.testing.assert_close(after, qGradientInformation(model, theta)(Z), rtol=0, atol=0)
    torch.testing.assert_close(acqf.current_trace, qGradientInformation(model, theta).current_trace)
    # new training data and new noise are picked up too
    model.likelihood.noise = 0.05
    torch.testing.assert_close(acqf(Z), qGradientInformation(model, theta)(Z), rtol=0, atol=0)
    expected = qGradientInformation(model, theta)(Z)
    model.train()  # e.g. to refit; BoTorch reverts to the raw training inputs in train mode
    torch.testing.assert_close(acqf(Z), expected, rtol=0, atol=0)
    model.set_train_data(model.transform_inputs(X[:5]), Y[:5, 0], strict=False)
    torch.testing.assert_close(acqf(Z), qGradientInformation(model, theta)(Z), rtol=0, atol=0)


def test_changed_kernel_of_a_gradient_gp_is_refused():
    d = 2
    kernel = make_kernel("rbf", d)
    gp = GradientGP(torch.rand(6, d, dtype=F64), kernel, 1e-3)
    acqf = qGradientInformation(gp, torch.full((d,), 0.5, dtype=F64))
    Z = torch.rand(3, 1, d, dtype=F64)
    acqf(Z)
    kernel.outputscale = 3.0
    with pytest.raises(RuntimeError, match="stale"):
        acqf(Z)
    with pytest.raises(RuntimeError, match="stale"):
        gp.condition_on(Z[0])


def _ax_style_acquisition(model, training_data, bounds, options, posterior_transform=None):
    """What ax.models.torch.botorch_modular.acquisition.Acquisition does with an acqf class."""
    input_constructor_kwargs = {
        "model": model,
        "X_baseline": training_data.X,
        "X_pending": None,
        "objective_thresholds": None,
        "constraints": None,
        "constraints_tuple": None,
        "objective": None,
        "posterior_transform": posterior_transform,
        **options,  # botorch_acqf_options
    }
    input_constructor = get_acqf_input_constructor(qGradientInformation)
    acqf_inputs = input_constructor(
        training_data=training_data,
        bounds=bounds,
        **{k: v for k, v in input_constructor_kwargs.items() if v is not None},
    )
    return qGradientInformation(**acqf_inputs)


def test_registered_input_constructor_builds_it_as_ax_does():
    d = 3
    X, Y = _raw_data(d, 10)
    model = _gp(X, Y, make_kernel("rbf", d), input_transform=Normalize(d))
    data = SupervisedDataset(X, Y, feature_names=[f"x{i}" for i in range(d)], outcome_names=["y"])
    theta = [4.0, 5.0, 3.5]
    search_box = [(3.5, 4.5), (4.5, 5.5), (3.0, 4.0)]  # Ax: a list of (lower, upper) per parameter
    acqf = _ax_style_acquisition(
        model, data, search_box, {"theta": theta}, ScalarizedPosteriorTransform(torch.ones(1, dtype=F64))
    )
    assert isinstance(acqf, qGradientInformation)
    torch.testing.assert_close(acqf.theta, torch.tensor(theta, dtype=F64))
    torch.manual_seed(0)
    bounds = torch.tensor(search_box, dtype=F64).T  # what Acquisition.optimize passes
    cand, value = optimize_acqf(acqf, bounds, q=2, num_restarts=2, raw_samples=32)
    assert cand.shape == (2, d) and (cand >= bounds[0]).all() and (cand <= bounds[1]).all()
    random = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(64, 2, d, dtype=F64)
    with torch.no_grad():
        assert value >= acqf(random).max() - 1e-12
    # the same as building it by hand
    torch.testing.assert_close(
        acqf(cand[None]), qGradientInformation(model, torch.tensor(theta, dtype=F64))(cand[None])
    )

    with pytest.raises(ValueError, match="needs theta"):
        _ax_style_acquisition(model, data, search_box, {})
    with pytest.raises(
        ValueError,
        match=r"outside bounds: theta\[0\] = 9 not in \[3.5, 4.5\]\. theta must be in the model.s input space",
    ):
        _ax_style_acquisition(model, data, search_box, {"theta": [9.0, 5.0, 3.5]})
    with pytest.raises(ValueError, match="no objective or outcome constraints"):
        get_acqf_input_constructor(qGradientInformation)(
            model=model, theta=theta, objective=lambda Y, X=None: Y[..., 0]
        )


@pytest.mark.parametrize("name", ["rbf", "matern52"])
def test_closed_form_and_autograd_gradients_agree_from_a_botorch_model(name):
    d = 3
    g = torch.Generator().manual_seed(7)
    D = torch.rand(9, d, generator=g, dtype=torch.float64)
    model = make_model(make_kernel(name, d), D, D.sum(-1, keepdim=True), 1e-3)
    theta = torch.full((d,), 0.5, dtype=torch.float64)
    fast, slow = (qGradientInformation(model, theta, gradient=m) for m in ("closed_form", "autograd"))
    assert fast._closed_form and not slow._closed_form
    assert qGradientInformation(model, theta)._closed_form  # "auto" picks the closed form here
    X = torch.rand(4, 3, d, generator=g, dtype=torch.float64, requires_grad=True)
    values = [acqf(X) for acqf in (fast, slow)]
    grads = [torch.autograd.grad(v.sum(), X)[0] for v in values]
    torch.testing.assert_close(values[0], values[1], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-8, atol=1e-10)


def test_closed_form_refused_where_it_does_not_apply_and_bad_gradient_named():
    d = 2
    X, Y = torch.rand(6, d, dtype=torch.float64), torch.rand(6, 1, dtype=torch.float64)
    theta = torch.full((d,), 0.5, dtype=torch.float64)
    poly = make_model(make_kernel("poly2", d), X, Y, 1e-3)
    assert not qGradientInformation(poly, theta)._closed_form  # "auto" falls back to autograd
    with pytest.raises(ValueError, match="closed_form"):
        qGradientInformation(poly, theta, gradient="closed_form")
    rbf = make_model(make_kernel("rbf", d), X, Y, 1e-3)
    with pytest.raises(ValueError, match="closed_form"):
        qGradientInformation(rbf, theta, basis=torch.eye(d, 1, dtype=torch.float64), gradient="closed_form")
    with pytest.raises(ValueError, match="gradient must be one of .*'fd'"):
        qGradientInformation(rbf, theta, gradient="fd")
