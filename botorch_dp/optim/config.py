r"""Public settings of a DP-GIBO run: ``DPGIBOConfig``, validated on construction, and how
the kernel and noise variance are read off it (``resolve_model``). A config holds one strategy
per option family (``optim.options``); the old flat option keywords are read in
``optim.legacy_options`` only; ``μ`` from a target ``(ε, δ)`` in ``optim.privacy_target``."""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_dp.gradient_gp import DEFAULT_JITTER, GradientGP
from botorch_dp.optim.deprecated import alias_property, rename_fields, warn_renamed
from botorch_dp.optim.legacy_options import install_flat_keywords
from botorch_dp.optim.options import (
    FAMILY_PROTOCOLS,
    BudgetSplit,
    Fitting,
    FixedClip,
    NoFitting,
    OptionFields,
    Options,
    Projected,
    SensitiveFitting,
    resolve,
)
from botorch_dp.optim.privacy_target import (
    DEFAULT_PRIVACY_MU,
    DEFAULT_TARGET_DELTA,
    MIN_USERS,
    check_per_user_losses,
    resolve_privacy,
)
from botorch_dp.optim.public_checks import check_kernel_variance
from botorch_dp.optim.subspace import SubspaceOracle
from botorch_dp.privacy.checks import (
    NONFINITE_LOSSES,
    check_choice,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
)
from botorch_dp.privacy.mechanisms import NonfiniteLosses
from botorch_dp.utils import check_bounds

__all__ = [
    "DEFAULT_PRIVACY_MU",
    "DEFAULT_TARGET_DELTA",
    "MIN_USERS",
    "STRATEGY_FIELDS",
    "DPGIBOConfig",
    "check_bias_tolerance",
    "check_per_user_losses",
    "clip_count_privacy_mu",
    "resolve_model",
    "resolve_privacy",
    "resolve_strategy",
    "split_privacy_mu",
]


@dataclass(frozen=True)
class DPGIBOConfig(OptionFields):
    r"""Public settings of a DP-GIBO run (paper symbols in brackets), validated on construction.

    Frozen: change a config with ``dataclasses.replace``. Each option is ONE strategy object per
    family (``optim.options.OptionFields``; the last seven attributes below), which checks its own
    values. At this boundary only, a registered name resolves once through the registry
    (``noise="adaptive_norm"``: the class with its defaults), ``clip`` also takes a number ``B``
    and ``projection`` a ``SubspaceOracle``. The old flat keywords (``clip_bound=...``,
    ``batch_size=...``, ...) still work, with a ``DeprecationWarning`` naming the new spelling
    (``optim.legacy_options``). Options that cannot run together are refused here, by the rule
    one of them declares (``Options.check``). The budget split is explicit (``mu_split``).

    Attributes:
        bounds: ``2 x d`` tensor, the public box ``Θ``.
        kernel: GPyTorch kernel with FIXED hyperparameters ``k``, chosen without looking
            at the sensitive losses. The loop works on a frozen copy and never fits it.
        model: Alternatively, a BoTorch model whose ``covar_module`` and likelihood noise
            are used (its training data are ignored). Models with outcome or input
            transforms are refused (see ``unsafe_allow_sensitive_fitting``).
        num_iterations: ``T``, number of noisy gradient steps.
        privacy_mu: ``μ``, total GDP budget on the validation users; ``math.inf`` runs
            non-private GIBO. Default 1.0 when no target ``(epsilon, delta)`` is given.
            After construction it always holds the ``μ`` the loop uses.
        step_size: ``η``.
        search_radius: Half-width of the local box around ``θ`` in which candidates are
            searched (float or ``d`` tensor, in units of ``θ``); default 10% of the box width.
        noise_variance: ``σ²``, observation-noise variance of the losses.
        theta0: ``θ₀`` (data-independent, finite); default the centre of ``bounds``.
        seed: ``None`` (default): the privacy noise is drawn from the operating system's
            entropy and the (public) candidate-search generator is seeded from it too. An
            integer makes the run reproducible (child stream 0 for the noise, 1 for the
            search) and every ``DPGIBO`` built from the config raises a ``PrivacyWarning``:
            the guarantee then assumes the seed stays secret (it is stored only in the
            protected checkpoint).
        nonfinite_losses: ``"refuse"`` (default): a NaN or ``inf`` per-user loss makes ``tell``
            raise, naming the points, before anything is released; ``"zero_user"``: such a
            user contributes 0 to that step's clipped sum (``n`` unchanged).
        target_delta: ``δ`` at which the guarantee's ``ε`` is reported; default ``delta``
            when a target ``(epsilon, delta)`` is given, else ``1e-5``.
        validation_mu_budget: Optional GDP budget for the ledger's filter; a step that would
            exceed it is refused before anything is released.
        record_non_private_diagnostics: Record NON-PRIVATE diagnostics (un-noised
            gradients, clip fractions, noise norms) in ``result().diagnostics``. Off by default.
        num_restarts, raw_samples: Passed to ``optimize_acqf`` (positive integers).
        user_chunk_size: Users per chunk when forming per-user gradients, or ``None``
            (default: ``privacy.mechanisms.default_chunk_size``).
        jitter: Diagonal floor of the kernel matrices (``>= 0``, finite).
        unsafe_allow_sensitive_fitting: LOUD OPT-OUT. Permits ``fitting=SensitiveFitting(fit)``
            and models with transforms, which look at the sensitive losses; the run then
            carries no privacy guarantee (reported ``μ = inf``, ``holds = False``).
        unsafe_allow_large_delta: Run although ``target_delta ≥ 1/n`` (``optim.public_checks``).
        allow_noise_dominated: Run although the budget is noise-dominated at ``n``. With
            either, the result's guarantee carries the warning (``cautions``).
        epsilon, delta: A target ``(ε, δ)`` of the whole run instead of ``privacy_mu``: the
            largest ``μ`` that is ``(ε, δ)``-DP (exact inversion of the GDP privacy profile).
            Giving ``privacy_mu`` as well is an error, except the ``μ`` they resolve to.
        clip: The clip policy (default ``FixedClip(1.0)``; a number ``B`` is ``FixedClip(B)``).
            ``QuantileClip`` (Andrew et al. 2021) tracks a private quantile of the norms.
        noise: The noise schedule (default ``FixedNoise()``: every step ``μ_g/√T``-GDP);
            ``AdaptiveNorm`` (Menart et al.) scales each step's noise to a released noisy norm
            under a GDP filter, after at most ``max_iterations`` steps.
        projection: ``NoProjection()`` (default) or ``Projected(oracle, acquisition)``
            (Kairouz et al.; a bare ``SubspaceOracle`` is ``Projected(oracle)``).
        step_rule: How a released gradient moves ``θ`` (default ``SGD()``).
        selection: Which iterate is returned (default ``Last()``).
        batches: How many points each step evaluates and how they are searched (default
            ``FixedBatches()``: ``d + 1`` points, joint search, ``speed="fast"``).
        fitting: ``NoFitting()`` (default) or the unsafe ``SensitiveFitting(fit)``; a model with
            an outcome transform makes it ``SensitiveFitting(fit, standardize=True)``. A user's
            ``Fitting`` is kept as given.
    """

    bounds: Tensor
    kernel: Kernel | None = None
    model: Any = None
    num_iterations: int = 25
    privacy_mu: float | None = None
    step_size: float = 0.1
    search_radius: float | Tensor | None = None
    noise_variance: float = 0.0
    theta0: Tensor | None = None
    seed: int | None = None
    nonfinite_losses: NonfiniteLosses = "refuse"
    target_delta: float | None = None
    validation_mu_budget: float | None = None
    record_non_private_diagnostics: bool = False
    num_restarts: int = 4
    raw_samples: int = 128
    user_chunk_size: int | None = None
    jitter: float = DEFAULT_JITTER
    unsafe_allow_sensitive_fitting: bool = False
    unsafe_allow_large_delta: bool = False
    allow_noise_dominated: bool = False
    epsilon: float | None = None
    delta: float | None = None
    # and one strategy per option family, declared once by OptionFields

    def __post_init__(self) -> None:
        # Every check raises ValueError naming the field; numeric fields are normalized
        # (numpy and 0-d tensor numbers accepted, tensors copied to float64).
        try:
            bounds = torch.as_tensor(self.bounds).detach()
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"bounds must be a 2 x d tensor or array, got {type(self.bounds).__name__}.") from err
        bounds = check_bounds(bounds).clone()
        _set(self, "bounds", bounds)
        d = bounds.shape[1]
        for name in STRATEGY_FIELDS:  # names and the shorthands resolve once, here
            _set(self, name, resolve_strategy(name, getattr(self, name)))
        super().__post_init__()  # each strategy implements its family's protocol
        privacy = resolve_privacy(self.privacy_mu, self.epsilon, self.delta, self.target_delta)
        for name, value in zip(("privacy_mu", "epsilon", "delta", "target_delta"), privacy, strict=True):
            _set(self, name, value)
        _set(self, "num_iterations", check_positive_int(self.num_iterations, "num_iterations (T)"))
        _set(self, "step_size", check_positive(self.step_size, "step_size (η)", allow_inf=False))
        _set(self, "noise_variance", check_nonnegative(self.noise_variance, "noise_variance (σ²)", allow_inf=False))
        if self.validation_mu_budget is not None:
            _set(self, "validation_mu_budget", check_positive(self.validation_mu_budget, "validation_mu_budget"))
        _set(self, "num_restarts", check_positive_int(self.num_restarts, "num_restarts"))
        _set(self, "raw_samples", check_positive_int(self.raw_samples, "raw_samples"))
        if self.user_chunk_size is not None:
            _set(self, "user_chunk_size", check_positive_int(self.user_chunk_size, "user_chunk_size"))
        _set(self, "jitter", check_nonnegative(self.jitter, "jitter", allow_inf=False))
        if self.seed is not None:
            _set(self, "seed", check_nonnegative_int(self.seed, "seed"))
        check_choice(self.nonfinite_losses, "nonfinite_losses", NONFINITE_LOSSES)
        for name in ("unsafe_allow_sensitive_fitting", "unsafe_allow_large_delta", "allow_noise_dominated"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        if self.theta0 is not None:
            theta0 = _float_tensor(self.theta0, "theta0 (θ₀)").reshape(-1)
            if theta0.shape != (d,) or not torch.isfinite(theta0).all():
                raise ValueError(f"theta0 (θ₀) must be a finite d = {d} vector, got {self.theta0!r}.")
            if (theta0 < bounds[0]).any() or (theta0 > bounds[1]).any():
                raise ValueError("theta0 (θ₀) must lie inside the bounds.")
            _set(self, "theta0", theta0)
        if self.search_radius is not None:
            radius = _float_tensor(self.search_radius, "search_radius")
            if radius.dim() > 1 or radius.numel() not in (1, d) or torch.isnan(radius).any() or (radius <= 0).any():
                raise ValueError(
                    f"search_radius must be a positive number or a positive d = {d} vector "
                    f"(inf allowed, NaN not), got {self.search_radius!r}."
                )
            _set(self, "search_radius", radius if radius.dim() else float(radius))
        if (self.kernel is None) == (self.model is None):
            raise ValueError("Give exactly one of kernel or model.")
        kernel = self.kernel if self.kernel is not None else getattr(self.model, "covar_module", None)
        if not isinstance(kernel, Kernel):
            raise ValueError(f"kernel (or model.covar_module) must be a gpytorch Kernel, got {type(kernel).__name__}.")
        for module in kernel.modules():
            ard = getattr(module, "ard_num_dims", None) if isinstance(module, Kernel) else None
            active = getattr(module, "active_dims", None)
            expected = d if active is None else int(torch.as_tensor(active).numel())
            if ard is not None and ard != expected:
                raise ValueError(
                    f"kernel: {type(module).__name__} has ard_num_dims = {ard}, but the bounds have "
                    f"d = {d} dimensions{'' if active is None else f' ({expected} active)'}."
                )
        check_kernel_variance(kernel, (bounds[0] + bounds[1]) / 2 if self.theta0 is None else self.theta0)
        _set(self, "fitting", _checked_fitting(self.fitting, self.model, self.unsafe_allow_sensitive_fitting))
        self.options.check(self.privacy_mu, d, self.num_iterations)  # what the options need of each other

    @classmethod
    def from_preset(cls, *names: str, **settings: Any) -> DPGIBOConfig:
        r"""A config from the named presets of ``optim.presets.PRESETS`` (``"paper"``,
        ``"e1_reach"``, ``"adaptive_noise"``; several combine), with ``settings`` (which win
        over the presets' values), e.g. ``DPGIBOConfig.from_preset("e1_reach", bounds=b, kernel=k)``."""
        from botorch_dp.optim.presets import preset_settings

        return cls(**{**preset_settings(*names), **settings})

    @property
    def options(self) -> Options:
        r"""The run's strategies, the config's own objects (the bundle is not cached on the config, so
        ``vars(config)`` holds only its fields and ``DPGIBOConfig(**vars(config))`` copies it)."""
        return Options(**{name: getattr(self, name) for name in STRATEGY_FIELDS})

    @property
    def max_evaluations(self) -> int:
        r"""The most objective evaluations the run can ask for: ``T · b`` with fixed batches, ``T · b_max``
        with adaptive ones (default ``Projection.default_batch_size``), plus the ``T + 1`` iterates an evaluated
        selection evaluates; plan anything that costs per evaluation with it, e.g. the DP-SGD
        training runs of a target training ε (``DPSGDConfig(planned_runs=...)``)."""
        o = self.options
        per_step = o.batches.per_step(o.projection.default_batch_size(self.bounds.shape[1]))
        selection = self.iteration_cap + 1 if o.selection.evaluated else 0
        return self.iteration_cap * per_step + selection

    @property
    def iteration_cap(self) -> int:
        r"""The most steps the run makes: ``num_iterations``, or ``max_iterations`` (``T_max``,
        default ``num_iterations``) with ``noise_schedule="adaptive_norm"``."""
        return self.options.iteration_cap(self.num_iterations)

    @property
    def mu_split(self) -> BudgetSplit:
        r"""How ``privacy_mu`` is split between the run's releases (``optim.options.BudgetSplit``)."""
        return self.options.split(self.privacy_mu)


#: Old field names (``rename_fields``): one name per concept (``batch_selection``, then
#: ``batch_search``, is ``batches``' ``search`` now: ``optim.legacy_options``).
RENAMED_FIELDS = {"privacy_budget_mu": "validation_mu_budget", "batch_selection": "batch_search"}
install_flat_keywords(DPGIBOConfig)
rename_fields(DPGIBOConfig, RENAMED_FIELDS)
DPGIBOConfig.steps_privacy_mu = alias_property(  # type: ignore[attr-defined]
    "DPGIBOConfig.steps_privacy_mu", "DPGIBOConfig.mu_split.steps_mu", lambda c: c.mu_split.steps_mu
)
DPGIBOConfig.selection_privacy_mu = alias_property(  # type: ignore[attr-defined]
    "DPGIBOConfig.selection_privacy_mu", "DPGIBOConfig.mu_split.selection_mu", lambda c: c.mu_split.selection_mu
)


#: The config fields that hold a strategy (each named as its registry family), with the family's protocol.
STRATEGY_FIELDS: dict[str, type] = dict(FAMILY_PROTOCOLS)
#: What a field takes besides a strategy or a registered name: ``clip=B``, ``projection=oracle``.
_SHORTHANDS: dict[str, tuple[type | tuple[type, ...], Callable[[Any], Any]]] = {
    "clip": ((numbers.Real, Tensor), FixedClip),
    "projection": (SubspaceOracle, Projected),
}


def resolve_strategy(name: str, value: Any) -> Any:
    r"""The strategy ``value`` gives the config field ``name``: a shorthand of ``_SHORTHANDS``, else
    as the registry resolves it (``optim.options.resolve``)."""
    shorthand = _SHORTHANDS.get(name)
    if shorthand is not None and isinstance(value, shorthand[0]) and not isinstance(value, bool):
        return shorthand[1](value)
    return resolve(name, value)


def _checked_fitting(fitting: Fitting, model: Any, unsafe: bool) -> Fitting:
    r"""The fitting strategy, refused unless the opt-out ``unsafe_allow_sensitive_fitting`` is set
    where it breaks the guarantee. The package's two are rebuilt with the model's outcome transform
    read in (``standardize``); a user's ``Fitting`` is kept as given (a model that standardizes is
    refused with it: only ``SensitiveFitting`` standardizes)."""
    fit = getattr(fitting, "fit", None)
    if fit is not None and not unsafe:
        raise ValueError(
            "fitting (hyperparameter_fit) would fit kernel hyperparameters on the sensitive losses, "
            "which breaks the privacy guarantee. Choose the hyperparameters from public "
            "information, or set unsafe_allow_sensitive_fitting=True to run without one."
        )
    own = isinstance(fitting, (NoFitting, SensitiveFitting))  # the model decides their standardize
    if not own and not fitting.holds and not unsafe:
        raise ValueError(
            f"{fitting.label} does not keep the privacy guarantee (holds is False); set "
            "unsafe_allow_sensitive_fitting=True to run without one."
        )
    transform = getattr(model, "outcome_transform", None)
    transform = getattr(model, "input_transform", None) if transform is None else transform
    if transform is not None and not unsafe:
        raise ValueError(
            f"The model carries a data-dependent transform ({type(transform).__name__}), "
            "which would be fit on the sensitive losses. Pass outcome_transform=None (and no "
            "input transform), or set unsafe_allow_sensitive_fitting=True to run without a "
            "privacy guarantee."
        )
    standardize = getattr(model, "outcome_transform", None) is not None
    if not own:
        if standardize:
            raise ValueError(
                f"{fitting.label} does not standardize the losses, which the model's outcome transform "
                "asks for; pass a model with outcome_transform=None, or fitting=SensitiveFitting(...)."
            )
        return fitting
    if fit is None and not standardize:
        return NoFitting()
    fitted = SensitiveFitting(fit, standardize)
    return fitting if fitted == fitting else fitted  # the model decides standardize


def _set(config: Any, name: str, value: Any) -> None:
    r"""Set a field of the frozen config while it is being validated."""
    object.__setattr__(config, name, value)


def split_privacy_mu(config: DPGIBOConfig) -> tuple[float, float | None]:
    r"""Deprecated: ``config.mu_split.gradient_mu`` and ``.precond_mu``."""
    warn_renamed("split_privacy_mu(config)", "config.mu_split.gradient_mu and .precond_mu")
    split = config.mu_split
    return split.gradient_mu, split.precond_mu


def clip_count_privacy_mu(config: DPGIBOConfig) -> float | None:
    r"""Deprecated: ``config.mu_split.clip_mu``."""
    warn_renamed("clip_count_privacy_mu(config)", "config.mu_split.clip_mu")
    return config.mu_split.clip_mu


def _float_tensor(value: Any, name: str) -> Tensor:
    r"""``value`` as a new float64 tensor, or a ``ValueError`` naming ``name``."""
    try:
        return torch.as_tensor(value).detach().to(torch.float64, copy=True)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a number or a tensor, got {value!r}.") from err


def _frozen_kernel(kernel: Kernel, device: torch.device) -> Kernel:
    kernel = copy.deepcopy(kernel).to(device=device, dtype=torch.float64)  # a copy on the data's device
    kernel.requires_grad_(False)
    kernel.eval()
    return kernel


def resolve_model(config: DPGIBOConfig) -> tuple[Kernel, float, bool]:
    r"""The frozen kernel (a float64 copy on the device of ``config.bounds``), ``σ²`` and whether losses are
    standardized (unsafe opt-out only)."""
    if config.kernel is not None:
        return _frozen_kernel(config.kernel, config.bounds.device), float(config.noise_variance), False
    model = config.model
    noise = config.noise_variance
    if noise == 0:
        noise = float(model.likelihood.noise.detach().mean())
    standardized = getattr(model, "outcome_transform", None) is not None
    return _frozen_kernel(model.covar_module, config.bounds.device), noise, standardized


def check_bias_tolerance(bias_tolerance: float, prior: GradientGP, theta0: Tensor, basis: Tensor | None = None) -> None:
    r"""Refuse a ``bias_tolerance`` at or above the prior gradient trace at ``θ₀`` (the
    first adaptive batch would be empty); ``prior`` is the ``GradientGP`` with no data,
    ``basis`` the projected acquisition's ``Ṽ`` at ``θ₀`` (then the projected trace)."""
    with torch.no_grad():
        prior_trace = float(prior.posterior_trace(theta0, basis))
    if not bias_tolerance < prior_trace:
        raise ValueError(
            f"bias_tolerance = {bias_tolerance:g} is not below the prior gradient trace "
            f"{prior_trace:g} at theta0: the first batch would be empty. Choose a smaller "
            "bias_tolerance."
        )
