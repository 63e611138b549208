r"""``botorch_dp.plan.kernel_fit``: the kernel fit on the proxy recovers the known length-scales
of a GP sample path (without touching the user's kernel or model), fits the noise variance
when the model has noise, and, when the fit fails, keeps the config's public kernel, warns once
with its hyperparameters by name, and lets the plan go on."""

import copy
import math
import warnings

import pytest
import torch
from botorch.exceptions.errors import ModelFittingError
from botorch.models import SingleTaskGP
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator.utils.errors import NanError, NotPSDError

from botorch_dp import DPGIBOConfig, SettingsWarning
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.optim.config import resolve_model
from botorch_dp.plan import KernelFitWarning, fit_kernel_on_proxy, plan_private_run

from .plan_helpers import FAST, N_PRIVATE


def _gp_sample_proxy(lengthscales, outputscale, n=20, features=4000, seed=0):
    r"""Per-user losses whose mean is a sample path of a zero-mean GP with an RBF kernel of the
    given length-scales and outputscale (random Fourier features, Rahimi & Recht), plus
    per-user linear terms that sum to zero over the users."""
    g = torch.Generator().manual_seed(seed)
    d = len(lengthscales)
    W = torch.randn(features, d, generator=g, dtype=torch.float64) / torch.tensor(lengthscales, dtype=torch.float64)
    b = 2 * math.pi * torch.rand(features, generator=g, dtype=torch.float64)
    w = torch.randn(features, generator=g, dtype=torch.float64) * math.sqrt(2 * outputscale / features)
    a = torch.randn(n, d, generator=g, dtype=torch.float64)
    a = a - a.mean(0)

    def proxy(X):
        return (torch.cos(X @ W.T + b) @ w)[:, None] + X @ a.T

    return proxy


def _box(lo, hi):
    return torch.tensor([[lo, lo], [hi, hi]], dtype=torch.float64)


def test_the_kernel_fit_recovers_the_length_scales_of_a_gp_sample():
    # fast along axis 0 (ℓ = 0.3), slow along axis 1 (ℓ = 1.5), outputscale 2, on [0, 3]²
    proxy = _gp_sample_proxy((0.3, 1.5), 2.0)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).requires_grad_(False)  # frozen: never fit on sensitive losses
    before = copy.deepcopy(kernel.state_dict())
    config = DPGIBOConfig(
        bounds=_box(0.0, 3.0),
        kernel=kernel,
        privacy_mu=1.0,
        num_iterations=1,
        step_size=0.1,
        batch_size=3,
        search_radius=0.3,
        acqf_maxiter=20,
        **FAST,
    )
    split = ProxySplit(0)  # planned on the fitting half of the proxy's users, as tune plans before a method choice
    plan = plan_private_run(
        split.fitting(proxy),
        config,
        num_users=N_PRIVATE,
        clip_quantiles=(0.5,),
        step_sizes=(0.1,),
        num_repeats=1,
        kernel_fit_points=40,
    )
    fit = plan.kernel_fit
    ls = fit.lengthscales
    assert ls[0] < ls[1]
    assert 0.3 / 1.5 < ls[0] < 0.3 * 1.5 and 1.5 / 1.5 < ls[1] < 1.5 * 1.5
    assert 2.0 / 2 < fit.hyperparameters["outputscale"][0] < 2.0 * 2
    assert fit.noise_variance is None and plan.config.noise_variance == 0.0  # σ² = 0 stays 0
    # the fit's data: 40 points in Θ, the proxy's mean losses there over the split's fitting half
    assert fit.points.shape == (40, 2) and ((fit.points >= 0) & (fit.points <= 3)).all()
    losses = proxy(fit.points)
    fitting, _ = split.halves(losses.shape[1])
    assert torch.allclose(fit.mean_losses, losses[:, fitting].mean(1), rtol=1e-12, atol=0)
    # the returned config carries them in a float64 copy of the same kernel class; the user's is unchanged
    fitted = plan.config.kernel
    assert type(fitted) is ScaleKernel and type(fitted.base_kernel) is RBFKernel and fitted is not kernel
    assert all(p.dtype == torch.float64 and not p.requires_grad for p in fitted.parameters())
    assert fitted.base_kernel.lengthscale.flatten().tolist() == pytest.approx(list(ls), rel=1e-12)
    assert float(fitted.outputscale.detach()) == pytest.approx(fit.hyperparameters["outputscale"][0], rel=1e-12)
    assert all(torch.equal(before[k], v) for k, v in kernel.state_dict().items())
    assert config.kernel is kernel and "lengthscale" in str(plan)
    # the private run's GP is the fitted one: the B candidates are its norm quantiles at θ₀
    A = GradientGP(plan.gradient_points, resolve_model(plan.config)[0], 0.0, jitter=config.jitter).gradient_weights(
        plan.config.theta0 if plan.config.theta0 is not None else torch.full((2,), 1.5, dtype=torch.float64)
    )
    norms = (A @ proxy(plan.gradient_points)[:, fitting]).norm(dim=0)  # the fitting half's users
    assert plan.norm_quantiles[0.5] == pytest.approx(float(torch.quantile(norms, 0.5)), rel=1e-9)


def test_the_noise_variance_is_fitted_when_the_model_has_noise():
    # a BoTorch model's covar_module and likelihood noise; the proxy adds N(0, 0.2²) per point
    proxy = _gp_sample_proxy((0.3, 1.5), 2.0)
    g = torch.Generator().manual_seed(100)

    def noisy(X):
        return proxy(X) + 0.2 * torch.randn(X.shape[0], 1, generator=g, dtype=torch.float64)

    X0 = torch.zeros(1, 2, dtype=torch.float64)
    model = SingleTaskGP(X0, X0[:, :1], covar_module=ScaleKernel(RBFKernel(ard_num_dims=2)), outcome_transform=None)
    before = copy.deepcopy(model.state_dict())
    config = DPGIBOConfig(bounds=_box(0.0, 3.0), model=model, privacy_mu=1.0, batch_size=3, **FAST)
    fitted, fit = fit_kernel_on_proxy(noisy, config, num_points=40, radius=1.0)
    assert 0.04 / 2.5 < fit.noise_variance < 0.04 * 2.5 and fitted.noise_variance == fit.noise_variance
    assert fit.lengthscales[0] < fit.lengthscales[1]
    assert (
        fitted.model is not model
        and fitted.model.covar_module.base_kernel.lengthscale.flatten().tolist()
        == pytest.approx(list(fit.lengthscales), rel=1e-12)
    )
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # the fit box: [θ₀ − 1, θ₀ + 1] around the centre θ₀ = (1.5, 1.5)
    assert torch.equal(fit.region, _box(0.5, 2.5))
    assert ((fit.points >= 0.5) & (fit.points <= 2.5)).all()


_FAILURES = {
    "ModelFittingError": ModelFittingError("All attempts to fit the model have failed."),
    "NotPSDError": NotPSDError("Matrix not positive definite after repeatedly adding jitter up to 1.0e-06."),
    "singular": torch.linalg.LinAlgError("linalg.solve: The solver failed because the input matrix is singular."),
    "NanError": NanError("cholesky_cpu: 1600 of 1600 elements of the torch.Size([40, 40]) tensor are NaN."),
    "non-finite": None,  # the fit "succeeds" with a NaN length-scale
}


@pytest.mark.parametrize("kind", list(_FAILURES))
def test_a_failed_fit_keeps_the_public_default_kernel_warns_once_and_the_plan_goes_on(kind, monkeypatch):
    import botorch.fit

    from botorch_dp.tuning import Hyperparameter, Integer, SearchSpace

    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Integer("width", 16, 128)])
    default = space.recommended_kernel()
    config = DPGIBOConfig(
        bounds=space.bounds, kernel=default, privacy_mu=1.0, num_iterations=1, step_size=0.1, batch_size=3, **FAST
    )

    def failing_fit(mll, *args, **kwargs):
        if _FAILURES[kind] is not None:
            raise _FAILURES[kind]
        mll.model.covar_module.base_kernel.raw_lengthscale.data.fill_(math.nan)
        return mll

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", failing_fit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = plan_private_run(
            _gp_sample_proxy((0.3, 0.5), 1.0),
            config,
            num_users=N_PRIVATE,
            clip_quantiles=(0.5,),
            step_sizes=(0.1,),
            num_repeats=1,
            coordinate_names=space.names,
            progress=False,
        )
    fallbacks = [w for w in caught if issubclass(w.category, KernelFitWarning)]
    assert len(fallbacks) == 1 and issubclass(KernelFitWarning, SettingsWarning)
    message = str(fallbacks[0].message)
    assert "outputscale = 1; base_kernel.lengthscale = lr 0.2, width 0.2; noise variance not modelled" in message
    error = _FAILURES[kind]
    cause = "a non-finite fitted value or marginal likelihood" if error is None else type(error).__name__
    assert f"failed ({cause})" in message
    # the plan went on with the space's default kernel, unchanged, and says why it was not fitted
    kernel = plan.config.kernel
    assert kernel is default and all(torch.equal(v, default.state_dict()[k]) for k, v in kernel.state_dict().items())
    assert plan.config.noise_variance == config.noise_variance and len(plan.trials) == 1
    fit = plan.kernel_fit
    assert fit.failure.startswith(cause) and math.isnan(fit.log_marginal_likelihood)
    assert fit.hyperparameters == {"base_kernel.lengthscale": (0.2, 0.2), "outputscale": (1.0,)}
    assert f"kernel fit on the proxy failed ({cause}" in str(plan)


def test_coordinate_names_must_name_every_coordinate():
    config = DPGIBOConfig(bounds=_box(0.0, 1.0), kernel=RBFKernel(ard_num_dims=2), privacy_mu=1.0, batch_size=3, **FAST)
    calls = []

    def proxy(X):
        calls.append(X)
        return X.sum(-1, keepdim=True).expand(-1, 3)

    with pytest.raises(ValueError, match=r"coordinate_names must name the d = 2 coordinates, got \['lr'\]"):
        fit_kernel_on_proxy(proxy, config, coordinate_names=["lr"])
    assert not calls


@pytest.mark.parametrize("moved", [(), ("outputscale",), ("outputscale", "lr")])
def test_a_fit_that_leaves_every_length_scale_at_its_start_warns_naming_them(moved, monkeypatch):
    import botorch.fit

    from botorch_dp.tuning import Hyperparameter, Integer, SearchSpace

    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Integer("width", 16, 128)])
    config = DPGIBOConfig(bounds=space.bounds, kernel=space.recommended_kernel(), privacy_mu=1.0, batch_size=3, **FAST)

    def stuck_fit(mll, *args, **kwargs):  # the optimizer "converges" without moving what is not in ``moved``
        kernel = mll.model.covar_module
        if "outputscale" in moved:
            kernel.outputscale = 2.0
        if "lr" in moved:
            kernel.base_kernel.lengthscale = torch.tensor([[0.5, 0.2]], dtype=torch.float64)
        return mll

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", stuck_fit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, fit = fit_kernel_on_proxy(_gp_sample_proxy((0.3, 0.5), 1.0), config, coordinate_names=space.names)
    unchanged = [str(w.message) for w in caught if issubclass(w.category, KernelFitWarning)]
    assert fit.failure is None
    if "lr" in moved:  # one length-scale moved: a fit, no warning
        assert not unchanged
        return
    assert len(unchanged) == 1
    assert "left every length-scale at its start value (base_kernel.lengthscale = lr 0.2, width 0.2" in unchanged[0]
    assert fit.lengthscales == pytest.approx((0.2, 0.2), rel=1e-12)


def test_a_real_fit_does_not_warn_of_unchanged_length_scales():
    config = DPGIBOConfig(
        bounds=_box(0.0, 3.0), kernel=ScaleKernel(RBFKernel(ard_num_dims=2)), privacy_mu=1.0, batch_size=3, **FAST
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFitWarning)
        _, fit = fit_kernel_on_proxy(_gp_sample_proxy((0.3, 1.5), 2.0), config, num_points=40)
    assert fit.failure is None


def test_a_capped_fit_stops_within_its_likelihood_evaluations_and_a_converged_one_is_unchanged(monkeypatch):
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from tests.plan.plan_helpers import plan_config
    from tests.plan.test_cache import Counting

    count = {"n": 0}
    forward = ExactMarginalLogLikelihood.forward

    def counted(self, *args, **kwargs):
        count["n"] += 1
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(ExactMarginalLogLikelihood, "forward", counted)
    fits = {}
    for cap in (None, 40, 8):
        count["n"] = 0
        _, fits[cap] = fit_kernel_on_proxy(Counting(), plan_config(), max_evaluations=cap)
        fits[cap, "evaluations"] = count["n"]
    # L-BFGS-B stops at the end of the iteration that reaches the cap (a line search may add a few), then one
    # evaluation of the fitted likelihood
    assert fits[8, "evaluations"] <= 8 + 4 < fits[None, "evaluations"]
    assert fits[8].hyperparameters != fits[None].hyperparameters and fits[8].max_evaluations == 8
    assert "at most 8 likelihood evaluations" in fits[8].describe()
    # converged within the cap: the same fit
    assert fits[None, "evaluations"] <= 40 and fits[40].hyperparameters == fits[None].hyperparameters
    with pytest.raises(ValueError, match="max_evaluations"):
        fit_kernel_on_proxy(Counting(), plan_config(), max_evaluations=0)


def test_a_scale_only_fit_keeps_the_length_scales_and_solves_the_likelihood_equations_in_the_scale():
    r"""``fit_lengthscales=False``: the length-scales stay as given, bit for bit, and the fitted outputscale ``s``
    and constant mean ``c`` satisfy the marginal likelihood's stationarity conditions written out, with
    ``K = s K₀ + ν I`` (``K₀`` the RBF correlation at the given length-scales, ``ν`` the fit's fixed nugget):
    ``c = 1ᵀK⁻¹y / 1ᵀK⁻¹1`` and ``tr(K⁻¹K₀) = rᵀK⁻¹K₀K⁻¹r`` with ``r = y − c``."""
    proxy = _gp_sample_proxy((0.3, 1.5), 2.0)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).to(torch.float64).requires_grad_(False)
    kernel.base_kernel.lengthscale = torch.tensor([[0.7, 0.9]], dtype=torch.float64)
    config = DPGIBOConfig(
        bounds=_box(0.0, 3.0), kernel=kernel, privacy_mu=1.0, num_iterations=1, step_size=0.1, batch_size=3,
        search_radius=0.3, acqf_maxiter=20, noise_variance=0.0, **FAST,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFitWarning)  # length-scales kept on purpose: no "unchanged" warning
        fitted, fit = fit_kernel_on_proxy(proxy, config, num_points=30, fit_lengthscales=False)
    assert fit.lengthscales == (0.7, 0.9) and fit.failure is None
    s = fit.hyperparameters["outputscale"][0]
    assert s != 1.0 and fitted.kernel.outputscale.item() == pytest.approx(s)
    X, y = fit.points, fit.mean_losses
    nugget = max(config.jitter, 1e-6 * float(y.var()))
    with torch.no_grad():
        K0 = kernel.base_kernel(X).to_dense()
    K_inv = torch.linalg.inv(s * K0 + nugget * torch.eye(len(y), dtype=torch.float64))
    ones = torch.ones_like(y)
    c = (ones @ K_inv @ y) / (ones @ K_inv @ ones)
    r = y - c
    trace, quadratic = torch.trace(K_inv @ K0), r @ K_inv @ K0 @ K_inv @ r
    assert float(quadratic) == pytest.approx(float(trace), rel=1e-3)
