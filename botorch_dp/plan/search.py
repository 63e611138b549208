r"""The search over clip bound, step size, number of steps and batch rule on the public proxy.

``plan_private_run`` fits the kernel (``kernel_fit``), takes the ``B`` candidates from the proxy's per-user
gradient-estimate norms at ``θ₀``, runs DP-GIBO on the proxy at the simulated private budget
(``proxy.simulation_config``) for every setting, and returns the best in a ``PrivatePlan`` (every ``PlanTrial``).
It plans DP-GIBO's settings only: the choice of METHOD is the methods layer's (``methods.choice``, which
``tune`` calls; ``choose_method=True`` here is deprecated and calls it too).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.methods.proxy import proxy_losses, simulation_config
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.optim.config import MIN_USERS, DPGIBOConfig
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options import batch_rule, from_spec
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.plan.kernel_fit import KernelFit, fit_kernel_on_proxy, fit_region
from botorch_dp.plan.trial_table import row, spread
from botorch_dp.privacy.checks import check_nonnegative_int, check_positive, check_positive_int, check_probability
from botorch_dp.privacy.mechanisms import clip_rows
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds, progress_bar, progress_stage, warn_renamed

if TYPE_CHECKING:  # the method choice, in ``methods``: imported where it is used, so planning loads it late
    from botorch_dp.methods.choice import MethodComparison
    from botorch_dp.methods.protocol import Method

__all__ = ["DEFAULT_CLIP_QUANTILES", "PlanTrial", "PrivatePlan", "plan_private_run", "planned_simulations"]

DEFAULT_CLIP_QUANTILES = (0.5, 0.75, 0.9)
"""Quantiles of the proxy's per-user gradient-estimate norms tried as ``B``."""


@dataclass(frozen=True)
class PlanTrial:
    r"""One setting tried on the proxy (all values public).

    Attributes:
        clip_quantile: The quantile of the proxy norms the bound was taken at.
        clip_bound: ``B`` (``B₀`` with ``clip_bound="adaptive"``).
        step_size: ``η``.
        num_iterations: ``T``.
        proxy_losses: The proxy's mean loss at the returned iterate, one per repeat.
        noise_std: The first gradient release's noise std per coordinate at the private
            budget and ``n`` (the same in the simulation, by construction).
        noise_to_signal: ``σ√d/‖ḡ_B(θ₀)‖``: expected norm of that noise over the norm of the
            proxy's clipped mean gradient estimate at ``θ₀`` (``inf`` if the latter is 0).
        bias_tolerance: The batch rule: the adaptive rule's tolerance on ``tr Σ_D(θ)``, or
            ``None`` for fixed batches (``batch_size``, default ``d + 1``).
        num_evaluations: The mean number of objective evaluations of its simulated runs
            (public: batch sizes depend on the kernel and the points only).
    """

    clip_quantile: float
    clip_bound: float
    step_size: float
    num_iterations: int
    proxy_losses: tuple[float, ...]
    noise_std: float
    noise_to_signal: float
    bias_tolerance: float | None = None
    num_evaluations: float = math.nan

    @property
    def mean_proxy_loss(self) -> float:
        r"""The mean of ``proxy_losses``: the setting's score (smaller is better; NaN when not simulated)."""
        return math.fsum(self.proxy_losses) / len(self.proxy_losses) if self.proxy_losses else math.nan


@dataclass
class PrivatePlan:
    r"""What ``plan_private_run`` returns. Everything here comes from the public proxy and the
    public settings, so all of it may be published.

    Attributes:
        config: The recommended ``DPGIBOConfig``: the given one with the fitted kernel (and
            noise variance) and the best ``B``, ``η``, ``T`` and batch rule.
        trials: Every ``PlanTrial``, in the order tried.
        best: The index of the recommended trial.
        norm_quantiles: ``{γ: B_γ}``, the proxy's per-user gradient-estimate norm quantiles at
            ``θ₀``, for the recommended batch rule (the other rules' are in ``trials``).
        gradient_points: The ``b x d`` first batch at ``θ₀`` the norms were taken at (same rule).
        num_users: ``n`` of the private run.
        num_proxy_users: ``n_p``: the proxy users the settings were planned on (the fitting half
            with a method choice, ``proxy_split``).
        kernel_fit: The ``KernelFit`` on the proxy, or ``None`` with ``fit_kernel=False``
            (the config's kernel kept; also kept after a failed fit, whose ``failure`` says why).
        given: The settings passed in (their kernel, ``B``, ``η``, ``T`` and batch rule, no
            planning) simulated the same way, so the plan's gain is visible (``None`` for a
            plan made without it). Its ``clip_quantile`` is the share of proxy norms ``≤ B``.
        methods: The choice of method made with this plan (``methods.choice.plan_then_compare``, which
            ``tune`` calls): DP-GIBO with ``config``, private random search and DP-HyPO simulated on
            the proxy with paired seeds, and the recommendation with its evidence; ``None`` for a plan
            of the settings only (``plan_private_run``'s own; DP-GIBO is then the method).
        proxy_split: The split of the proxy's users (``methods.proxy_split``) when the method was
            chosen: the kernel, the trials and the selection methods' ``C`` read its fitting
            half only (``num_proxy_users`` is that half's size), the comparison its scoring
            half only; ``None`` without a method choice (every step read all proxy users).
    """

    config: DPGIBOConfig
    trials: list[PlanTrial]
    best: int
    norm_quantiles: dict[float, float]
    gradient_points: Tensor
    num_users: int
    num_proxy_users: int
    kernel_fit: KernelFit | None = None
    given: PlanTrial | None = None
    methods: MethodComparison | None = None
    proxy_split: ProxySplit | None = None

    @property
    def recommended_method(self) -> Method:
        r"""The method to run privately, resolved (its ``run_private`` runs it as simulated):
        the comparison's recommendation, or DP-GIBO with ``config`` without a comparison."""
        from botorch_dp.methods.dp_gibo import DPGIBOMethod  # loaded late (see the imports)

        return DPGIBOMethod(self.config) if self.methods is None else self.methods.recommended

    def table(self) -> str:
        r"""The trials as a fixed-width text table, the recommended one marked ``*`` and the
        settings passed in (``given``) last, marked ``g``; ``+-`` is the standard error over the
        repeats (``n/a`` with one)."""
        head = (
            f"{'':1} {'batch rule':>12} {'quantile':>8} {'B':>10} {'eta':>8} {'T':>4} {'proxy loss':>11} {'+-':>9} "
            f"{'noise std':>10} {'noise/signal':>12}"
        )
        rows = [("*" if i == self.best else "", t) for i, t in enumerate(self.trials)]
        lines = [head] + [row(mark, t) for mark, t in rows + ([("g", self.given)] if self.given is not None else [])]
        return "\n".join(lines)

    def __str__(self) -> str:
        c = self.config
        budget = f"mu = {c.privacy_mu:.4g}" + (
            "" if c.epsilon is None else f" (epsilon = {c.epsilon:g}, delta = {c.delta:g})"
        )
        kernel = "kernel: the config's (not fitted)" if self.kernel_fit is None else self.kernel_fit.describe()
        given = ""
        if self.given is not None:
            best = self.trials[self.best]
            given = (
                f"\nrecommended (*): proxy loss {best.mean_proxy_loss:.5g} +- {spread(best)}; the settings passed "
                f"(g): {self.given.mean_proxy_loss:.5g} +- {spread(self.given)}"
            )
        methods = "" if self.methods is None else f"\n{self.methods}"
        return (
            f"DP-GIBO plan on a public proxy of {self.num_proxy_users} users for a private run on "
            f"{self.num_users} users at {budget}; noise simulated at the private budget.\n"
            f"{kernel}\n{self.table()}{given}"
            f"{methods}"
        )


def _baseline(config: DPGIBOConfig, estimate: Callable, simulate: Callable, seed: int) -> PlanTrial:
    r"""The settings passed in simulated as they are (``PrivatePlan.given``): the share of proxy norms ``≤ B``
    (``B₀`` of a moving bound)."""
    _, estimates = estimate(DPGIBO(dataclasses.replace(config, seed=seed, validation_mu_budget=None)))
    given_bound = config.clip.current(config.clip.initial_state())
    share = float((estimates.norm(dim=1) <= given_bound).double().mean())
    return simulate(
        config, estimates, given_bound, share, config.step_size, config.num_iterations, config.batches.tolerance
    )


def _with_clip_bound(config: DPGIBOConfig, bound: float) -> DPGIBOConfig:
    r"""``config`` whose clip policy starts at ``bound`` (``B``, or ``B₀`` of a moving bound): its spec's
    ``bound`` replaced, rebuilt through the registry."""
    spec = config.clip.spec()
    if "bound" not in spec:
        raise ValueError(f"A plan sets the clip bound; {config.clip!r} has none in its spec {spec!r}.")
    return dataclasses.replace(config, clip=from_spec("clip", {**spec, "bound": bound}))


def _checked_floats(values: Sequence[float], name: str, check: Callable[[float, str], float]) -> tuple[float, ...]:
    values = tuple(values)
    if not values:
        raise ValueError(f"{name} must hold at least one value.")
    return tuple(check(v, name) for v in values)


def _with_batch_rule(config: DPGIBOConfig, bias_tolerance: float | None) -> DPGIBOConfig:
    r"""``config`` with the adaptive rule at ``bias_tolerance``, or fixed batches for ``None``."""
    spec = config.batches.spec()  # the search settings carry over (and an adaptive rule's b_max)
    search = dict(search=spec.get("search", "joint"), maxiter=spec.get("maxiter"), speed=spec.get("speed", "fast"))
    if bias_tolerance is None:
        if config.batches.tolerance is None:
            return config
        return dataclasses.replace(config, batches=batch_rule(None, **search))
    rule = batch_rule(None, bias_tolerance=bias_tolerance, max_size=spec.get("max_size"), **search)
    return dataclasses.replace(config, batches=rule)


def _checked_tolerances(values: Sequence[float | None]) -> tuple[float | None, ...]:
    values = tuple(values)
    if not values:
        raise ValueError("bias_tolerances must hold at least one value (None: fixed batches).")
    return tuple(None if v is None else check_positive(v, "bias_tolerances", allow_inf=False) for v in values)


def planned_simulations(
    config: DPGIBOConfig,
    *,
    clip_quantiles: Sequence[float] = DEFAULT_CLIP_QUANTILES,
    step_sizes: Sequence[float] | None = None,
    num_iterations: Sequence[int] | None = None,
    bias_tolerances: Sequence[float | None] | None = None,
    num_repeats: int = 3,
    choose_method: bool | None = None,
    methods: Sequence[Method] | None = None,
    baseline: bool = True,
    search_settings: bool = True,
    **other_options: object,
) -> int:
    r"""The number of simulated runs ``plan_private_run(proxy, config, **options)`` makes (public):
    ``(rules · quantiles · step sizes · T's + 1) · repeats`` for the settings (the ``+ 1``: the
    settings passed in), plus ``methods · repeats`` for a method choice (``choose_method=True``, or
    ``methods`` given with ``choose_method`` unset: ``tune``'s, ``methods.choice.plan_then_compare``).
    ``other_options``, the planner's keywords that do not change the count, are ignored."""
    settings = len(tuple(clip_quantiles)) * (3 if step_sizes is None else len(tuple(step_sizes)))
    settings *= 1 if num_iterations is None else len(tuple(num_iterations))
    settings *= 1 if bias_tolerances is None else len(tuple(bias_tolerances))
    count = ((settings if search_settings else 0) + (1 if baseline else 0)) * int(num_repeats)
    if choose_method or (choose_method is None and methods is not None):
        from botorch_dp.methods.choice import DEFAULT_METHODS  # loaded late (see the imports)

        count += len(tuple(DEFAULT_METHODS if methods is None else methods)) * int(num_repeats)
    return count


def plan_private_run(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    *,
    num_users: int,
    clip_quantiles: Sequence[float] = DEFAULT_CLIP_QUANTILES,
    step_sizes: Sequence[float] | None = None,
    num_iterations: Sequence[int] | None = None,
    bias_tolerances: Sequence[float | None] | None = None,
    fit_kernel: bool = True,
    kernel_fit_points: int | None = None,
    kernel_fit_radius: float | Tensor | None = None,
    kernel_fit_evaluations: int | None = None,
    kernel_fit_lengthscales: bool = True,
    coordinate_names: Sequence[str] | None = None,
    num_repeats: int = 3,
    seed: int = 0,
    progress: bool = True,
    choose_method: bool | None = None,
    methods: Sequence[Method] | None = None,
    baseline: bool = True,
    search_settings: bool = True,
) -> PrivatePlan:
    r"""Fit the kernel, then choose ``B``, ``η``, ``T`` and the batch rule of a private DP-GIBO
    run, all on a PUBLIC proxy objective.

    The proxy's users must be public (a public dataset or split, opt-in or synthetic users): their
    losses are used without noise or accounting. Never pass the sensitive objective. A proxy that
    TRAINS on the sensitive training rows (``TorchModelTuningObjective.with_data`` on a public
    validation split) is charged: every model it trains goes to the sensitive objective's ledger.

    Args:
        proxy_objective: Maps ``q x d`` points to the ``q x n_p`` per-user losses of the
            proxy users (the signature of the private objective).
        config: The private run's config: bounds, kernel, batch rule, privacy budget
            (``privacy_mu`` or ``epsilon``/``delta``), schedule and selection. Its kernel
            hyperparameters (and ``noise_variance`` when positive) are fitted unless
            ``fit_kernel=False``; its ``clip_bound`` (``clip_init`` with ``"adaptive"``),
            ``step_size``, ``num_iterations`` and batch rule are what the search chooses.
        num_users: ``n``, the number of users of the private run (public).
        clip_quantiles: Quantiles in ``(0, 1]`` of the proxy's per-user gradient-estimate
            norms at ``θ₀`` tried as ``B`` (or ``B₀``), per batch rule.
        step_sizes: ``η`` candidates (default: ``config.step_size`` times 0.5, 1 and 2).
        num_iterations: ``T`` candidates (default: ``config.num_iterations``).
        bias_tolerances: Batch rules tried: a positive ``bias_tolerance`` (adaptive batches up
            to ``max_batch_size``; in units of the fitted kernel's gradient variance, and below
            its prior trace at ``θ₀``), or ``None`` for the fixed batches of ``config.batches``
            (default ``d + 1``). Default: the config's own rule only.
        fit_kernel: Fit the kernel on the proxy first (``fit_kernel_on_proxy``); ``False``
            keeps the config's kernel and noise variance. A fit that fails keeps them too,
            with a ``KernelFitWarning`` that names the kept hyperparameters, and the plan goes on.
        kernel_fit_points: ``m``, Sobol points of the fit (default ``10 d``).
        kernel_fit_radius: Half-width of the fit box around ``θ₀`` (cut to ``Θ``); ``None``
            (default): all of ``Θ``, the region the run's iterates may visit.
        kernel_fit_evaluations: At most this many likelihood evaluations in the fit (``None``:
            to convergence); a planning budget's cut (``plan.budget``).
        kernel_fit_lengthscales: ``False``: the fit keeps the config's length-scales and fits the
            rest (outputscale, noise variance); a planning budget's cut (``plan.budget``).
        coordinate_names: The ``d`` names of ``θ``'s coordinates (``tune`` passes the search
            space's), which name the length-scales in that warning.
        num_repeats: Simulated runs per setting (different noise; the same across settings);
            the table's ``+-`` is their standard error.
        seed: Seed of the fit points and of the simulated runs' noise and search (public
            randomness on public data).
        progress: Show a tqdm bar over the simulated runs (public values only).
        choose_method: DEPRECATED (a ``DeprecationWarning``): the choice of METHOD is the methods
            layer's, ``methods.choice.plan_then_compare``, which ``tune(method="auto", proxy=...)``
            calls. ``True`` (or ``methods`` given) still calls it and returns the plan with the
            comparison attached (``PrivatePlan.methods``, ``recommended_method``, ``proxy_split``):
            DP-GIBO with the settings planned on the fitting half of the proxy's users, private
            random search and DP-HyPO (where affordable) simulated on the other half with the
            private run's noise, ``num_repeats`` times with fresh paired seeds (skipped for a config
            without a finite privacy budget). ``None`` (default) or ``False``: settings only.
        methods: DEPRECATED with ``choose_method``: the candidates (default
            ``methods.choice.DEFAULT_METHODS``).
        baseline: Also simulate the settings passed in (``PrivatePlan.given``; ``False``: ``None``).
        search_settings: ``False`` (a planning budget, ``plan.budget``): no setting is simulated; the first
            rule, the middle quantile, the given ``η`` and ``T`` are recommended unsimulated (empty
            ``proxy_losses``, ``num_evaluations`` the rule's most, ``DPGIBOConfig.max_evaluations``).

    Everything the plan does reads only the PUBLIC proxy and public settings: it costs no
    privacy, and the sensitive objective is not an argument (nor called).

    Returns:
        The ``PrivatePlan``: recommended config and report.

    Raises:
        ValueError: Naming the argument, for a bad candidate list, ``num_users < 2``, a
            bias tolerance at or above the prior gradient trace, or a proxy that does not
            return per-user losses.
    """
    if choose_method is not None or methods is not None:  # the method choice: the methods layer's
        return _deprecated_method_choice(
            proxy_objective,
            config,
            choose_method,
            methods,
            num_users=num_users,
            clip_quantiles=clip_quantiles,
            step_sizes=step_sizes,
            num_iterations=num_iterations,
            bias_tolerances=bias_tolerances,
            fit_kernel=fit_kernel,
            kernel_fit_points=kernel_fit_points,
            kernel_fit_radius=kernel_fit_radius,
            kernel_fit_evaluations=kernel_fit_evaluations,
            kernel_fit_lengthscales=kernel_fit_lengthscales,
            coordinate_names=coordinate_names,
            num_repeats=num_repeats,
            seed=seed,
            progress=progress,
            baseline=baseline,
            search_settings=search_settings,
        )
    n = check_positive_int(num_users, "num_users (n)")
    if n < MIN_USERS:
        raise ValueError(f"num_users (n) must be at least {MIN_USERS}: the private run protects each of its n users.")
    quantiles = _checked_floats(
        clip_quantiles, "clip_quantiles", lambda v, name: check_probability(v, name, allow_one=True)
    )
    etas = _checked_floats(
        (0.5 * config.step_size, config.step_size, 2.0 * config.step_size) if step_sizes is None else step_sizes,
        "step_sizes",
        lambda v, name: check_positive(v, name, allow_inf=False),
    )
    Ts = tuple(
        check_positive_int(T, "num_iterations")
        for T in ((config.num_iterations,) if num_iterations is None else num_iterations)
    )
    if not Ts:
        raise ValueError("num_iterations must hold at least one value.")
    tolerances = _checked_tolerances((config.batches.tolerance,) if bias_tolerances is None else bias_tolerances)
    if not search_settings:  # one setting, recommended without a simulation
        quantiles, etas, Ts, tolerances = (quantiles[len(quantiles) // 2],), (config.step_size,), Ts[:1], tolerances[:1]
    flags = dict(fit_kernel=fit_kernel, baseline=baseline, search_settings=search_settings)
    flags["kernel_fit_lengthscales"] = kernel_fit_lengthscales
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}.")
    if kernel_fit_points is not None and check_positive_int(kernel_fit_points, "kernel_fit_points") < 2:
        raise ValueError(f"kernel_fit_points must be at least 2, got {kernel_fit_points}.")
    if kernel_fit_radius is not None:
        fit_region(config, kernel_fit_radius, "kernel_fit_radius")  # refused before the proxy is called
    if kernel_fit_evaluations is not None:
        check_positive_int(kernel_fit_evaluations, "kernel_fit_evaluations")
    num_repeats = check_positive_int(num_repeats, "num_repeats")
    seeds = child_seeds([check_nonnegative_int(seed, "seed")], num_repeats)

    given_config = config  # the settings passed in, simulated as they are for the "given" row
    kernel_fit = None
    if fit_kernel:
        config, kernel_fit = fit_kernel_on_proxy(
            proxy_objective,
            config,
            num_points=kernel_fit_points,
            radius=kernel_fit_radius,
            seed=seed,
            coordinate_names=coordinate_names,
            max_evaluations=kernel_fit_evaluations,
            fit_lengthscales=kernel_fit_lengthscales,
        )
    total = (len(tolerances) * len(quantiles) * len(etas) * len(Ts) * search_settings + baseline) * num_repeats
    bar = progress_bar(total=total, disable=not progress, desc="planning on the proxy", unit="run")
    progress_stage(method="dp_gibo (its settings)")
    with warnings.catch_warnings():
        # the simulation's seeded noise is public randomness on public data, not a release
        warnings.filterwarnings("ignore", category=PrivacyWarning)
        warnings.filterwarnings("ignore", category=SettingsWarning)  # the proxy's n is not the run's: said below
        probes = []
        for tol in tolerances:  # every rule is checked (against the fitted kernel) before any run
            try:
                probes.append(
                    DPGIBO(dataclasses.replace(_with_batch_rule(config, tol), seed=seeds[0], validation_mu_budget=None))
                )
            except ValueError as err:
                raise ValueError(f"bias_tolerances: {err}") from err
        n_p: list[int] = []

        def estimates_at_theta0(probe: DPGIBO) -> tuple[Tensor, Tensor]:
            r"""The probe's first batch and the proxy users' gradient estimates there (public)."""
            points = probe.ask()  # public: depends on θ₀, the kernel and the search seed only
            losses = proxy_losses(proxy_objective, points)
            if n_p and losses.shape[1] != n_p[0]:
                raise ValueError(f"proxy_objective returned {losses.shape[1]} users, earlier {n_p[0]}.")
            n_p[:] = [losses.shape[1]]
            gp = GradientGP(points, probe.kernel, probe.noise_variance, jitter=probe.config.jitter)
            with torch.no_grad():
                return points, (gp.gradient_weights(probe.theta) @ losses).transpose(0, 1)  # n_p x d

        def simulate(
            rule_config: DPGIBOConfig,
            estimates: Tensor,
            bound: float,
            gamma: float,
            eta: float,
            T: int,
            tol: float | None,
            run: bool = True,
        ) -> PlanTrial:
            signal = float(clip_rows(estimates, bound)[0].mean(0).norm())
            scores, noise_std, evaluations = [], math.nan, []
            if not run:  # no choice to make: recorded unsimulated (the budget's least planning)
                most = dataclasses.replace(rule_config, num_iterations=T).max_evaluations
                return PlanTrial(gamma, bound, eta, T, (), math.nan, math.nan, tol, float(most))
            for r, s in enumerate(seeds):
                sim = simulation_config(
                    rule_config,
                    n,
                    n_p[0],
                    step_size=eta,
                    num_iterations=T,
                    seed=s,
                    clip=_with_clip_bound(rule_config, bound).clip,
                )
                release = DPGIBO(sim).run(proxy_objective, progress=False).release
                evaluations.append(release.evaluation_points.shape[0])
                scores.append(
                    float(torch.as_tensor(proxy_objective(release.theta.unsqueeze(0))).to(torch.float64).mean())
                )
                if r == 0:
                    stds = release.recorded("noise", "noise_stds")
                    noise_std = stds[0] if stds else math.nan
                bar.update(1)
            ratio = noise_std * math.sqrt(estimates.shape[1]) / signal if signal > 0 else math.inf
            return PlanTrial(
                gamma, bound, eta, T, tuple(scores), noise_std, ratio, tol, sum(evaluations) / len(evaluations)
            )

        trials, norm_quantiles, gradient_points = [], {}, {}
        try:
            for tol, probe in zip(tolerances, probes, strict=True):
                rule_config = _with_batch_rule(config, tol)
                points, estimates = estimates_at_theta0(probe)
                norms = estimates.norm(dim=1)
                bounds = torch.quantile(norms, torch.tensor(quantiles, dtype=torch.float64)).tolist()
                if not all(b > 0 and math.isfinite(b) for b in bounds):
                    raise ValueError(
                        f"The proxy's gradient-estimate norm quantiles {bounds} are not all positive and finite."
                    )
                norm_quantiles[tol], gradient_points[tol] = dict(zip(quantiles, bounds, strict=True)), points.clone()
                for (gamma, bound), eta, T in itertools.product(zip(quantiles, bounds, strict=True), etas, Ts):
                    trials.append(simulate(rule_config, estimates, bound, gamma, eta, T, tol, search_settings))
            # the settings passed in, as they are (their kernel, B, η, T, batch rule): the plan's baseline
            given = _baseline(given_config, estimates_at_theta0, simulate, seeds[0]) if baseline else None
        finally:
            bar.close()
        n_p_value = n_p[0]
    best = min(range(len(trials)), key=lambda i: trials[i].mean_proxy_loss)
    t = trials[best]
    if t.noise_to_signal >= 1.0:
        warnings.warn(
            f"On the proxy, every step of the best setting is mostly noise: expected noise-to-signal ratio "
            f"{t.noise_to_signal:.3g} (noise std {t.noise_std:.3g} per coordinate, clip bound {t.clip_bound:.3g}, "
            f"T = {t.num_iterations}, n = {n}). The private run will hardly improve on θ₀: raise the budget, "
            "take fewer iterations or find more users.",
            SettingsWarning,
            stacklevel=2,
        )
    recommended = dataclasses.replace(
        _with_clip_bound(_with_batch_rule(config, t.bias_tolerance), t.clip_bound),
        step_size=t.step_size,
        num_iterations=t.num_iterations,
    )
    return PrivatePlan(
        config=recommended,
        trials=trials,
        best=best,
        norm_quantiles=norm_quantiles[t.bias_tolerance],
        gradient_points=gradient_points[t.bias_tolerance],
        num_users=n,
        num_proxy_users=n_p_value,
        kernel_fit=kernel_fit,
        given=given,
    )


def _deprecated_method_choice(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    choose_method: bool | None,
    methods: Sequence[Method] | None,
    **options: object,
) -> PrivatePlan:
    r"""``plan_private_run(choose_method=..., methods=...)``: deprecated; the method choice is the methods
    layer's (``methods.choice.plan_then_compare``), called here as ``tune`` calls it."""
    warn_renamed("plan_private_run(choose_method=..., methods=...)", "methods.choice.plan_then_compare", 4)
    if choose_method is not None and not isinstance(choose_method, bool):
        raise ValueError(f"choose_method must be True or False, got {choose_method!r}.")
    assert config.privacy_mu is not None  # DPGIBOConfig resolves it
    if choose_method is False or not math.isfinite(config.privacy_mu):  # settings only
        return plan_private_run(proxy_objective, config, **options)  # type: ignore[arg-type]
    from botorch_dp.methods.choice import DEFAULT_METHODS, plan_then_compare  # loaded late (see the imports)

    plan, comparison, split = plan_then_compare(
        proxy_objective,
        lambda fitting: plan_private_run(fitting, config, **options),  # type: ignore[arg-type]
        DEFAULT_METHODS if methods is None else methods,
        num_users=options["num_users"],  # type: ignore[arg-type]
        seed=options["seed"],  # type: ignore[arg-type]
        num_repeats=options["num_repeats"],  # type: ignore[arg-type]
        progress=options["progress"],  # type: ignore[arg-type]
    )
    return dataclasses.replace(plan, methods=comparison, proxy_split=split)
