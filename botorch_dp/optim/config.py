r"""Public settings of a DP-GIBO run: ``DPGIBOConfig``, validated on construction, and how
the kernel and noise variance are read off it (``resolve_model``). The option fields and their
strategies are read in ``optim.config_options``; ``μ`` from a target ``(ε, δ)`` in
``optim.privacy_target``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_dp.gradient_gp import DEFAULT_JITTER, GradientGP
from botorch_dp.optim.batch_search import BATCH_SEARCHES, SEARCH_SPEEDS, BatchSearch
from botorch_dp.optim.config_options import absorb_strategies, build_options, check_option_fields, set_field
from botorch_dp.optim.deprecated import alias_property, rename_fields, warn_renamed
from botorch_dp.optim.noise_schedule import DEFAULT_NORM_MU_FRACTION, NoiseSchedule
from botorch_dp.optim.options import BudgetSplit, Options
from botorch_dp.optim.privacy_target import (
    DEFAULT_PRIVACY_MU,
    DEFAULT_TARGET_DELTA,
    MIN_USERS,
    check_per_user_losses,
    resolve_privacy,
)
from botorch_dp.optim.public_checks import check_kernel_variance
from botorch_dp.optim.selection import Selection
from botorch_dp.optim.step_rules import Preconditioner, StepRule, check_step_rule
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
    "DPGIBOConfig",
    "check_bias_tolerance",
    "check_per_user_losses",
    "clip_count_privacy_mu",
    "default_batch_size",
    "resolve_model",
    "resolve_privacy",
    "split_privacy_mu",
]


@dataclass(frozen=True)
class DPGIBOConfig:
    r"""Public settings of a DP-GIBO run (paper symbols in brackets), validated on construction.

    Frozen: change a config with ``dataclasses.replace``. The options are read into strategy
    objects (``config.options``: clip policy, noise schedule, projection, step rule, selection,
    batch rule, fitting; ``optim.options``), and the option fields also take those objects,
    e.g. ``clip_bound=QuantileClip(1.0, quantile=0.9)``, ``noise_schedule=AdaptiveNorm()``,
    ``step_rule=FullMatrixAdaGrad(PrivateGOE(0.3))``, ``selection=NoisyLoss(0.3, loss_clip=5.0)``
    or ``subspace=Projected(oracle, acquisition=True)`` (they are stored as the fields they
    stand for). Options that cannot run together are refused here, by the rule one of them
    declares (``Options.check``): the private preconditioner with adaptive clipping, with the
    adaptive noise schedule, or with a subspace that moves; ``"min_noisy_norm"`` without the
    adaptive schedule; a spending option with ``privacy_mu = inf``.

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
            After construction it always holds the ``μ`` the loop uses (the resolved one
            when ``epsilon`` is given).
        clip_bound: ``B``, per-user clipping norm of the gradient estimates, or
            ``"adaptive"``: ``B_t`` tracks a private quantile of the per-user estimate norms
            (Andrew et al. 2021; ``optim.adaptive_clip``), with ``clip_init``,
            ``clip_quantile``, ``clip_learning_rate`` and ``clip_mu_fraction``; works with
            either noise schedule, any ``subspace`` (the norms are those of the projected
            estimates) and partitioned users, not with the private preconditioner.
        step_size: ``η``.
        step_rule: ``"sgd"`` (``θ ← θ − η g``), ``"adagrad"`` or ``"adagrad_full"``
            (full-matrix AdaGrad, Kairouz et al.) on the privatized gradients
            (``torch.optim.SGD``/``Adagrad``/``FullMatrixAdagrad``, then projection onto ``Θ``;
            see ``step_rules``).
        preconditioner: With ``step_rule="adagrad_full"`` (default ``"noisy"``; ``None``
            otherwise): ``"noisy"`` (``(Σ ũ ũᵀ)^{1/2}`` of the released gradients, free),
            ``"noisy_debiased"`` (the same minus the public noise energy ``Σ σ² I``, free) or
            ``"private"`` (the clean ``(Σ ū ūᵀ)^{1/2}`` released with GOE noise: each step
            releases twice, ``μ_g² + μ_H² = μ_steps²``; needs a fixed ``subspace`` or none,
            the fixed ``noise_schedule`` and a fixed ``clip_bound``).
        preconditioner_mu_fraction: With ``preconditioner="private"``: the share ``f`` of
            ``μ_steps²`` (``steps_privacy_mu``: ``μ`` less a charged selection) spent on the
            preconditioner, ``μ_H = μ_steps√f``, ``μ_g = μ_steps√(1 − f)``
            (default 0.5, i.e. ``μ_g = μ_H = μ/√2``); ``None`` otherwise.
        subspace: A public ``SubspaceOracle`` (``optim.subspace``): each step projects the
            per-user gradient estimates on its ``d x k`` basis ``Ṽ_t`` BEFORE clipping,
            releases ``k`` noisy coordinates (same sensitivity ``2B/n`` and ``μ``) and steps
            along ``Ṽ_t ũ_t``. The basis must not be computed from the sensitive users.
        subspace_acquisition: With a ``subspace``: choose batches for the projected gradient
            ``Ṽ_tᵀ∇f`` only, maximizing the reduction of ``tr(Ṽ_tᵀ Σ_D(θ) Ṽ_t)``, and apply
            ``bias_tolerance`` to that projected trace (spec A5; the points stay public, so the
            guarantee is unchanged). ``batch_size`` and ``max_batch_size`` then default to
            ``k + 1`` when the oracle has an integer ``k``.
        batch_size: ``b`` for fixed batches (Alg. 1). Default ``d + 1`` when no
            ``bias_tolerance`` is given.
        bias_tolerance: Tolerance of adaptive batches (Alg. 2; the paper calls it ε, here
            ε always means the privacy loss): add points until
            ``tr Σ_D(θ) ≤ bias_tolerance`` or ``max_batch_size`` points were added.
        max_batch_size: ``b_max`` of the adaptive rule (default ``d + 1``).
        search_radius: Half-width of the local box around ``θ`` in which candidates are
            searched (float or ``d`` tensor, in units of ``θ``); default 10% of the box width.
        noise_variance: ``σ²``, observation-noise variance of the losses.
        theta0: ``θ₀`` (data-independent, finite); default the centre of ``bounds``.
        seed: ``None`` (default): the privacy noise is drawn from the operating system's
            entropy and the (public) candidate-search generator is seeded from it too, so
            no one can regenerate the noise. An integer makes the run reproducible (tests,
            reproductions): the noise comes from child stream 0 of the seed and the
            candidate search from child stream 1, and every ``DPGIBO`` built from the
            config raises a ``PrivacyWarning``: the guarantee then assumes the seed stays
            secret. The seed is stored only in the (protected) checkpoint.
        nonfinite_losses: What a NaN or ``inf`` per-user loss does. ``"refuse"`` (default):
            ``tell`` raises ``ValueError`` naming the points, before anything is released;
            the refusal itself is observable and reveals that some user's loss at those
            points was not finite. ``"zero_user"``: a user with any non-finite loss among
            the losses used at a step contributes 0 to that step's clipped sum (``n`` is
            unchanged, so the sensitivity and the guarantee hold for every input).
        batch_search: How a batch is chosen. ``"joint"`` (default): ``optimize_acqf``
            over all ``q`` points at once; with adaptive batches, the smallest
            ``q ≤ b_max`` whose optimized batch reaches ``bias_tolerance`` (bisection over ``q``).
            ``"greedy"``: one point at a time, conditioning on the points already chosen
            (myopic: on the d = 15 GP problem, 16 greedy points leave a posterior gradient
            trace about 3× that of 16 joint points). See ``batch_search``.
        target_delta: ``δ`` at which the guarantee's ``ε`` is reported; default ``delta``
            when a target ``(epsilon, delta)`` is given, else ``1e-5``.
        validation_mu_budget: Optional GDP budget for the ledger's filter; a step that would
            exceed it is refused before anything is released.
        record_non_private_diagnostics: Record NON-PRIVATE diagnostics (un-noised
            gradients, clip fractions, noise norms) in ``result().diagnostics``. Off by default.
        num_restarts, raw_samples: Passed to ``optimize_acqf`` (positive integers).
        acqf_maxiter: Optional cap on the L-BFGS-B iterations of each restart of the batch
            search (``optimize_acqf``'s ``options={"maxiter": ...}``; positive integer);
            ``None`` (default): BoTorch's default (2000). With the default ``acqf_speed="fast"``
            the warm-started runs are capped at ``WARM_MAXITER`` (10) anyway, so a cap acts only
            on cold searches (the first step, adaptive bisection, greedy batches); with
            ``acqf_speed="reference"`` a cap of 100 was 3.4× faster at d = 100 for a paired loss
            difference of +0.005 ± 0.005 over 9 seeds (``reports/acqf_maxiter.md``). The
            ``fast_search`` preset that set it is withdrawn (``reports/design_optimizer_speed.md``).
            It affects only public candidate search, never the privacy accounting.
        acqf_speed: ``"fast"`` (default): the batch search evaluates the acquisition's gradient in
            closed form (RBF, Matérn-5/2), starts each joint batch from the previous one moved by
            the step for at most ``batch_search.WARM_MAXITER`` (10) L-BFGS-B iterations and runs on
            one torch thread; ``"reference"``: autograd and random starts, as
            before issue 33 (``reports/batch_search_speed.md``). Public computation only.
        user_chunk_size: Users per chunk when forming per-user gradients (a positive
            integer), or ``None`` (default): chosen from ``n`` and ``d`` by
            ``privacy.mechanisms.default_chunk_size`` (4096 to 65536 users).
        jitter: Diagonal floor of the kernel matrices (``>= 0``, finite).
        unsafe_allow_sensitive_fitting: LOUD OPT-OUT. Permits ``hyperparameter_fit`` and
            models with transforms, which look at the sensitive losses; the run then
            carries no privacy guarantee (reported ``μ = inf``, ``holds = False``).
        hyperparameter_fit: ``fn(kernel, train_X, mean_losses)`` called before each step;
            refused unless the opt-out is set.
        unsafe_allow_large_delta: Run although ``target_delta ≥ 1/n`` (refused before the first
            release, or the first evaluation of an objective that knows ``n``; only warned at the
            default ``target_delta`` of a ``privacy_mu`` run). ``optim.public_checks``.
        allow_noise_dominated: Run although the budget is noise-dominated at ``n`` (refused as
            above). With either, the result's guarantee carries the warning (``cautions``).
        epsilon: A target privacy loss ``ε`` of the whole run on the validation users,
            instead of ``privacy_mu``; needs ``delta``. The run is then ``μ``-GDP with
            the largest ``μ`` that is ``(ε, δ)``-DP, found by exact inversion of the GDP
            privacy profile (``privacy.analysis.gdp.gdp_mu``), and ``privacy_mu`` holds
            that ``μ``. Giving ``privacy_mu`` as well is an error, except the ``μ`` that
            ``(epsilon, delta)`` resolve to (as in a copy of a resolved config, e.g.
            ``dataclasses.replace`` or a checkpoint). ``math.inf``: non-private.
        delta: The ``δ`` of the target ``(epsilon, delta)``, in ``(0, 1)``; only with
            ``epsilon``.

    Adaptive noise and the choice of the returned iterate (Menart et al.; ``noise_schedule``
    and ``selection`` modules). The budget split is explicit: the selection's charge
    ``μ_sel`` (0 for ``"last"`` and ``"min_noisy_norm"``) comes out of ``privacy_mu``, and the
    gradient steps get ``steps_privacy_mu = √(μ² − μ_sel²)``, so the whole run stays
    ``μ``-GDP (``privacy_mu`` or the resolved target ``(epsilon, delta)``).

    Attributes:
        noise_schedule: ``"fixed"`` (default): every step ``μ_steps/√T``-GDP, noise
            ``2B√T/(n μ_steps)``. ``"adaptive_norm"``: per step, a noisy norm of the clipped
            mean gradient (``μ_N``-GDP, sensitivity ``2B/n``), then the gradient with noise
            ``σ_t = max(max(N_t, 0)/(c_snr √d), Δ/μ_max)``, charged its realised
            ``μ_t = Δ/σ_t``; a GDP filter stops the run when ``μ_steps`` is spent (the last
            step spends exactly the rest), after at most ``max_iterations`` steps. The number
            of steps is random and public. Needs a finite ``privacy_mu``.
        max_iterations: ``T_max``, the cap on the steps of ``"adaptive_norm"`` (default
            ``num_iterations``); refused with ``"fixed"``, which makes exactly
            ``num_iterations`` steps.
        norm_mu_fraction: ``f_N`` in ``(0, 1)``: each norm release is
            ``μ_N = μ_steps √(f_N/T_max)``-GDP (default 0.1; ``"adaptive_norm"`` only).
        snr_factor: ``c_snr > 0``, the target ratio of the released norm to the noise norm
            ``σ_t √d`` (default ``√log(n μ_steps/(√2·0.05))``, at least 1; ``"adaptive_norm"`` only).
        max_step_mu: ``μ_max``, the largest non-final gradient release (default
            ``min(μ_steps/2, 2 μ_steps/√T_max)``; ``"adaptive_norm"`` only).
        selection: The iterate ``result()`` returns: ``"last"`` (default, ``θ_T``);
            ``"min_noisy_norm"`` (the iterate with the smallest released noisy norm; free,
            ``"adaptive_norm"`` only); ``"exponential"`` (exponential mechanism on the
            iterates' mean losses clamped to ``[0, loss_clip]``, Gumbel-max; pure
            ``selection_epsilon``-DP, charged ``μ_sel = 2Φ⁻¹(e^ε/(1 + e^ε))``);
            ``"noisy_loss"`` (Gaussian noisy mean losses of all iterates, the smallest wins;
            ``selection_mu``-GDP). The last two ask for one more batch after the steps: the
            ``T + 1`` iterates ``θ_0..θ_T``, evaluated on the same users.
        selection_epsilon: ``ε_sel`` of ``"exponential"`` (required there only).
        selection_mu: ``μ_sel`` of ``"noisy_loss"``, all ``T + 1`` scores together
            (required there only).
        loss_clip: ``C``: per-user losses are clamped to ``[0, C]`` for the evaluated
            selections (sensitivity ``C/n``; required there only).

    Adaptive clipping (``clip_bound="adaptive"``, Andrew et al. 2021; all ``None`` otherwise).
    Each step releases, besides the gradient at ``B_t``, the noisy count of users with
    ``‖A y_i‖ ≤ B_t`` (``μ_C/√T_max``-GDP, ledger key ``step-t/clip``; the gradient is
    ``step-t/grad``, released by the noise schedule from ``μ_g`` at ``Δ_t = 2B_t/n``), and
    ``B_{t+1} = B_t exp(−η_C(b̃_t/n − γ))``. The split is ``μ_C = μ_steps√f_C``,
    ``μ_g = μ_steps√(1 − f_C)``: the run stays ``privacy_mu``-GDP.

    Attributes:
        clip_init: ``B₀ > 0`` (default 1.0; a public choice, e.g. from ``botorch_dp.plan``).
        clip_quantile: ``γ`` in ``(0, 1)``, the target quantile of the norms (default 0.5).
        clip_learning_rate: ``η_C > 0`` of the geometric update (default 0.2).
        clip_mu_fraction: ``f_C`` in ``(0, 1)``, the counts' share of ``μ_steps²`` (default 0.1).
    """

    bounds: Tensor
    kernel: Kernel | None = None
    model: Any = None
    num_iterations: int = 25
    privacy_mu: float | None = None
    clip_bound: float | Literal["adaptive"] = 1.0
    step_size: float = 0.1
    step_rule: StepRule = "sgd"
    preconditioner: Preconditioner | None = None
    preconditioner_mu_fraction: float | None = None
    subspace: SubspaceOracle | None = None
    subspace_acquisition: bool = False
    batch_size: int | None = None
    bias_tolerance: float | None = None
    max_batch_size: int | None = None
    search_radius: float | Tensor | None = None
    noise_variance: float = 0.0
    theta0: Tensor | None = None
    seed: int | None = None
    nonfinite_losses: NonfiniteLosses = "refuse"
    batch_search: BatchSearch = "joint"
    target_delta: float | None = None
    validation_mu_budget: float | None = None
    record_non_private_diagnostics: bool = False
    num_restarts: int = 4
    raw_samples: int = 128
    user_chunk_size: int | None = None
    jitter: float = DEFAULT_JITTER
    unsafe_allow_sensitive_fitting: bool = False
    hyperparameter_fit: Callable[[Kernel, Tensor, Tensor], None] | None = None
    unsafe_allow_large_delta: bool = False
    allow_noise_dominated: bool = False
    epsilon: float | None = None
    delta: float | None = None
    # Menart et al.: adaptive noise and private choice of the returned iterate
    noise_schedule: NoiseSchedule = "fixed"
    max_iterations: int | None = None
    norm_mu_fraction: float = DEFAULT_NORM_MU_FRACTION
    snr_factor: float | None = None
    max_step_mu: float | None = None
    selection: Selection = "last"
    selection_epsilon: float | None = None
    selection_mu: float | None = None
    loss_clip: float | None = None
    # Andrew et al. 2021: adaptive clipping by a private quantile
    clip_init: float | None = None
    clip_quantile: float | None = None
    clip_learning_rate: float | None = None
    clip_mu_fraction: float | None = None
    # speed knob of the (public) batch search
    acqf_maxiter: int | None = None
    acqf_speed: str = "fast"

    def __post_init__(self) -> None:
        # Every check raises ValueError naming the field; numeric fields are normalized
        # (numpy and 0-d tensor numbers accepted, tensors copied to float64).
        try:
            bounds = torch.as_tensor(self.bounds).detach()
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"bounds must be a 2 x d tensor or array, got {type(self.bounds).__name__}.") from err
        bounds = check_bounds(bounds).clone()
        set_field(self, "bounds", bounds)
        d = bounds.shape[1]
        absorb_strategies(self)  # strategy objects given in the option fields
        privacy = resolve_privacy(self.privacy_mu, self.epsilon, self.delta, self.target_delta)
        for name, value in zip(("privacy_mu", "epsilon", "delta", "target_delta"), privacy, strict=True):
            set_field(self, name, value)
        if not (isinstance(self.clip_bound, str) and self.clip_bound == "adaptive"):
            set_field(self, "clip_bound", check_positive(self.clip_bound, "clip_bound (B)", allow_inf=False))
        set_field(self, "num_iterations", check_positive_int(self.num_iterations, "num_iterations (T)"))
        set_field(self, "step_size", check_positive(self.step_size, "step_size (η)", allow_inf=False))
        check_step_rule(self.step_rule)
        check_choice(self.batch_search, "batch_search", BATCH_SEARCHES)
        if self.batch_size is not None:
            set_field(self, "batch_size", check_positive_int(self.batch_size, "batch_size (b)"))
        if self.bias_tolerance is not None:
            set_field(self, "bias_tolerance", check_positive(self.bias_tolerance, "bias_tolerance", allow_inf=False))
        if self.bias_tolerance is not None and self.batch_size is not None:
            raise ValueError("Give either batch_size (fixed) or bias_tolerance (adaptive), not both.")
        if self.max_batch_size is not None:
            set_field(self, "max_batch_size", check_positive_int(self.max_batch_size, "max_batch_size (b_max)"))
        set_field(
            self, "noise_variance", check_nonnegative(self.noise_variance, "noise_variance (σ²)", allow_inf=False)
        )
        if self.validation_mu_budget is not None:
            set_field(self, "validation_mu_budget", check_positive(self.validation_mu_budget, "validation_mu_budget"))
        set_field(self, "num_restarts", check_positive_int(self.num_restarts, "num_restarts"))
        set_field(self, "raw_samples", check_positive_int(self.raw_samples, "raw_samples"))
        if self.acqf_maxiter is not None:
            set_field(self, "acqf_maxiter", check_positive_int(self.acqf_maxiter, "acqf_maxiter"))
        check_choice(self.acqf_speed, "acqf_speed", SEARCH_SPEEDS)
        if self.user_chunk_size is not None:
            set_field(self, "user_chunk_size", check_positive_int(self.user_chunk_size, "user_chunk_size"))
        set_field(self, "jitter", check_nonnegative(self.jitter, "jitter", allow_inf=False))
        if self.seed is not None:
            set_field(self, "seed", check_nonnegative_int(self.seed, "seed"))
        check_choice(self.nonfinite_losses, "nonfinite_losses", NONFINITE_LOSSES)
        if self.theta0 is not None:
            theta0 = _float_tensor(self.theta0, "theta0 (θ₀)").reshape(-1)
            if theta0.shape != (d,) or not torch.isfinite(theta0).all():
                raise ValueError(f"theta0 (θ₀) must be a finite d = {d} vector, got {self.theta0!r}.")
            if (theta0 < bounds[0]).any() or (theta0 > bounds[1]).any():
                raise ValueError("theta0 (θ₀) must lie inside the bounds.")
            set_field(self, "theta0", theta0)
        if self.search_radius is not None:
            radius = _float_tensor(self.search_radius, "search_radius")
            if radius.dim() > 1 or radius.numel() not in (1, d) or torch.isnan(radius).any() or (radius <= 0).any():
                raise ValueError(
                    f"search_radius must be a positive number or a positive d = {d} vector "
                    f"(inf allowed, NaN not), got {self.search_radius!r}."
                )
            set_field(self, "search_radius", radius if radius.dim() else float(radius))
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
        if self.hyperparameter_fit is not None and not self.unsafe_allow_sensitive_fitting:
            raise ValueError(
                "hyperparameter_fit would fit kernel hyperparameters on the sensitive losses, "
                "which breaks the privacy guarantee. Choose the hyperparameters from public "
                "information, or set unsafe_allow_sensitive_fitting=True to run without one."
            )
        transform = getattr(self.model, "outcome_transform", None)
        transform = getattr(self.model, "input_transform", None) if transform is None else transform
        if transform is not None and not self.unsafe_allow_sensitive_fitting:
            raise ValueError(
                f"The model carries a data-dependent transform ({type(transform).__name__}), "
                "which would be fit on the sensitive losses. Pass outcome_transform=None (and no "
                "input transform), or set unsafe_allow_sensitive_fitting=True to run without a "
                "privacy guarantee."
            )
        check_option_fields(self)
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
        r"""The run's strategies (``optim.options``), one per family, built from the (checked)
        fields: the fields stay the config's one spelling (``vars``, ``dataclasses.replace`` and
        the checkpoint see them), and strategy objects given in them are read into them."""
        return build_options(self)

    @property
    def max_evaluations(self) -> int:
        r"""The most objective evaluations the run can ask for: ``T · b`` with fixed batches,
        ``T · b_max`` with adaptive ones (``b`` and ``b_max`` default to ``d + 1``). Plan
        anything that costs per evaluation with it, e.g. the DP-SGD training runs of a
        target training ε (``DPSGDConfig(planned_runs=...)``). With
        ``subspace_acquisition`` the defaults are ``k + 1`` (``default_batch_size``)."""
        o = self.options
        per_step = o.batches.per_step(o.projection.default_batch_size(self.bounds.shape[1]))
        # an evaluated selection asks for the T + 1 iterates after the last step
        selection = self.iteration_cap + 1 if o.selection.evaluated else 0
        return self.iteration_cap * per_step + selection

    @property
    def iteration_cap(self) -> int:
        r"""The most steps the run makes: ``num_iterations``, or ``max_iterations`` (``T_max``,
        default ``num_iterations``) with ``noise_schedule="adaptive_norm"``."""
        return self.options.iteration_cap(self.num_iterations)

    @property
    def mu_split(self) -> BudgetSplit:
        r"""How ``privacy_mu`` is split between the run's releases (``optim.options.BudgetSplit``,
        the one place this is computed): ``selection_mu`` (``μ_sel``, 0 for a free selection),
        ``steps_mu = √(μ² − μ_sel²)``, and the steps' shares ``gradient_mu``, ``clip_mu`` (adaptive
        clipping's counts) and ``precond_mu`` (the private preconditioner)."""
        return self.options.split(self.privacy_mu)


#: Old field names (``rename_fields``): one name per concept.
RENAMED_FIELDS = {"privacy_budget_mu": "validation_mu_budget", "batch_selection": "batch_search"}
rename_fields(DPGIBOConfig, RENAMED_FIELDS)
DPGIBOConfig.steps_privacy_mu = alias_property(  # type: ignore[attr-defined]
    "DPGIBOConfig.steps_privacy_mu", "DPGIBOConfig.mu_split.steps_mu", lambda c: c.mu_split.steps_mu
)
DPGIBOConfig.selection_privacy_mu = alias_property(  # type: ignore[attr-defined]
    "DPGIBOConfig.selection_privacy_mu", "DPGIBOConfig.mu_split.selection_mu", lambda c: c.mu_split.selection_mu
)


def default_batch_size(config: DPGIBOConfig) -> int:
    r"""Default ``b`` and ``b_max``: ``d + 1``, or ``k + 1`` with ``subspace_acquisition`` when
    the oracle has an integer ``k`` (spec A5: ``k + 1`` points pin down ``k`` directions)."""
    return config.options.projection.default_batch_size(config.bounds.shape[1])


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
