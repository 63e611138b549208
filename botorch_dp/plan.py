r"""Plan a private DP-GIBO run on a PUBLIC proxy, without touching the sensitive data.

Choosing the clip bound ``B``, the step size ``η`` or the number of steps ``T`` by trying them
on the sensitive objective silently voids the guarantee (every try is a release that nobody
accounts for). ``plan_private_run`` chooses them on a public proxy instead: an objective with
the same signature (``q x d`` points to ``q x n_p`` per-user losses) built from data whose use
costs no privacy, e.g. a public dataset of the same task, a public split, opt-in users, or
synthetic users of the same shape. The sensitive objective is not an argument: the plan cannot
see it. Because everything it looks at is public, the returned config is public too, and the
private run that uses it is exactly as private as one with a hand-picked config.

How the private run's noise is simulated on the proxy. Every release of DP-GIBO (gradient,
noisy norm, clip count, selection score) has sensitivity proportional to ``1/n``: the noise on
the scale of the mean is ``c/(n μ)`` for a constant ``c`` of the setting. A proxy run with
``n_p`` users at ``μ' = μ n/n_p`` therefore draws noise of exactly the distribution the private
run with ``n`` users at ``μ`` will draw (``simulation_config``), and the existing DP-GIBO loop
runs unchanged on the proxy. What the proxy cannot tell is how far its losses are from the
sensitive ones: the plan is as good as the proxy is similar.

The steps:

1. ``B`` candidates: quantiles of the proxy's per-user gradient-estimate norms ``‖A y_i‖`` at
   ``θ₀`` (the first batch DP-GIBO would ask for; ``A = ∇k(θ₀, D)K⁻¹``). With
   ``clip_bound="adaptive"`` the candidates are ``clip_init`` (``B₀``).
2. Each setting (``B`` × ``η`` × ``T``) runs DP-GIBO on the proxy at the simulated budget
   ``num_repeats`` times; its score is the proxy's mean loss at the returned iterate.
3. The setting with the smallest mean score is returned in a ``DPGIBOConfig``, with a report
   of every setting: scores, the first step's noise std at the private budget, and the
   expected noise-to-signal ratio ``σ√d/‖ḡ_B(θ₀)‖`` of that step on the proxy.

Kernel hyperparameters, the batch rule and the privacy budget are taken from the given config
(chosen from public information too); the plan does not fit them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.config import MIN_USERS, DPGIBOConfig, check_per_user_losses
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.checks import check_nonnegative_int, check_positive, check_positive_int, check_probability
from botorch_dp.privacy.mechanisms import clip_rows
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds

__all__ = ["DEFAULT_CLIP_QUANTILES", "PlanTrial", "PrivatePlan", "plan_private_run", "simulation_config"]

#: Quantiles of the proxy's per-user gradient-estimate norms tried as ``B``.
DEFAULT_CLIP_QUANTILES = (0.5, 0.75, 0.9)


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
    """

    clip_quantile: float
    clip_bound: float
    step_size: float
    num_iterations: int
    proxy_losses: tuple[float, ...]
    noise_std: float
    noise_to_signal: float

    @property
    def mean_proxy_loss(self) -> float:
        r"""The mean of ``proxy_losses``: the setting's score (smaller is better)."""
        return math.fsum(self.proxy_losses) / len(self.proxy_losses)


@dataclass
class PrivatePlan:
    r"""What ``plan_private_run`` returns. Everything here comes from the public proxy and the
    public settings, so all of it may be published.

    Attributes:
        config: The recommended ``DPGIBOConfig`` (the given one with the best ``B``, ``η``, ``T``).
        trials: Every ``PlanTrial``, in the order tried.
        best: The index of the recommended trial.
        norm_quantiles: ``{γ: B_γ}``, the proxy's per-user gradient-estimate norm quantiles at ``θ₀``.
        gradient_points: The ``b x d`` first batch at ``θ₀`` the norms were taken at.
        num_users: ``n`` of the private run.
        num_proxy_users: ``n_p`` of the proxy.
    """

    config: DPGIBOConfig
    trials: list[PlanTrial]
    best: int
    norm_quantiles: dict[float, float]
    gradient_points: Tensor
    num_users: int
    num_proxy_users: int

    def table(self) -> str:
        r"""The trials as a fixed-width text table, the recommended one marked ``*``."""
        head = f"{'':1} {'quantile':>8} {'B':>10} {'eta':>8} {'T':>4} {'proxy loss':>11} {'+-':>9} {'noise std':>10} {'noise/signal':>12}"
        lines = [head]
        for i, t in enumerate(self.trials):
            spread = (max(t.proxy_losses) - min(t.proxy_losses)) / 2
            lines.append(
                f"{'*' if i == self.best else '':1} {t.clip_quantile:>8.3g} {t.clip_bound:>10.4g} {t.step_size:>8.3g} "
                f"{t.num_iterations:>4d} {t.mean_proxy_loss:>11.5g} {spread:>9.2g} {t.noise_std:>10.3g} {t.noise_to_signal:>12.3g}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        c = self.config
        budget = f"mu = {c.privacy_mu:.4g}" + ("" if c.epsilon is None else f" (epsilon = {c.epsilon:g}, delta = {c.delta:g})")
        return (
            f"DP-GIBO plan on a public proxy of {self.num_proxy_users} users for a private run on "
            f"{self.num_users} users at {budget}; noise simulated at the private budget.\n{self.table()}"
        )


def simulation_config(config: DPGIBOConfig, num_users: int, num_proxy_users: int, **changes) -> DPGIBOConfig:
    r"""The config whose run on ``n_p`` proxy users draws the noise the private run on ``n``
    users will draw.

    Every release's noise is ``c/(n μ_j)`` on the scale of the mean, so each GDP parameter is
    scaled by ``s = n/n_p``: the steps' ``μ_steps`` (and with it every per-step ``μ``, the
    adaptive schedule's and the clip counts'), ``selection_mu``, ``max_step_mu``, and for the
    exponential selection ``ε_sel`` (its scores' sensitivity is ``C/n`` too). ``privacy_mu``
    is then ``√((s μ_steps)² + μ_sel'²)``. The budget filter is dropped (the proxy is public).

    Args:
        config: The private run's config.
        num_users: ``n``.
        num_proxy_users: ``n_p``.
        **changes: Further fields to replace (e.g. ``clip_bound``, ``seed``).
    """
    scale = check_positive_int(num_users, "num_users (n)") / check_positive_int(num_proxy_users, "num_proxy_users")
    c = config
    selection_epsilon = None if c.selection_epsilon is None else c.selection_epsilon * scale
    selection_mu = None if c.selection_mu is None else c.selection_mu * scale
    if math.isinf(c.privacy_mu):
        mu = math.inf
    else:
        mu_sel = 0.0
        if selection_epsilon is not None:
            mu_sel = pure_dp_to_gdp_mu(selection_epsilon)
        elif selection_mu is not None:
            mu_sel = selection_mu
        mu = math.hypot(scale * c.steps_privacy_mu, mu_sel)
    return dataclasses.replace(
        c, privacy_mu=mu, epsilon=None, delta=None, privacy_budget_mu=None,
        selection_epsilon=selection_epsilon, selection_mu=selection_mu,
        max_step_mu=None if c.max_step_mu is None else c.max_step_mu * scale, **changes,
    )


def _checked_floats(values: Sequence[float], name: str, check: Callable[[float, str], float]) -> tuple[float, ...]:
    values = tuple(values)
    if not values:
        raise ValueError(f"{name} must hold at least one value.")
    return tuple(check(v, name) for v in values)


def plan_private_run(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    *,
    num_users: int,
    clip_quantiles: Sequence[float] = DEFAULT_CLIP_QUANTILES,
    step_sizes: Sequence[float] | None = None,
    num_iterations: Sequence[int] | None = None,
    num_repeats: int = 2,
    seed: int = 0,
) -> PrivatePlan:
    r"""Choose ``B``, ``η`` and ``T`` of a private DP-GIBO run on a PUBLIC proxy objective.

    The proxy must be public (a public dataset or split of the same task, opt-in users,
    synthetic users): its losses are used without noise and without accounting, which costs
    no privacy only if nobody's sensitive data are in it. Never pass the sensitive objective.
    The returned config is computed from public inputs only, and is public.

    Args:
        proxy_objective: Maps ``q x d`` points to the ``q x n_p`` per-user losses of the
            proxy users (the signature of the private objective).
        config: The private run's config: bounds, kernel, batch rule, privacy budget
            (``privacy_mu`` or ``epsilon``/``delta``), schedule and selection. Its
            ``clip_bound`` (``clip_init`` with ``"adaptive"``), ``step_size`` and
            ``num_iterations`` are what the plan chooses.
        num_users: ``n``, the number of users of the private run (public).
        clip_quantiles: Quantiles in ``(0, 1]`` of the proxy's per-user gradient-estimate
            norms at ``θ₀`` tried as ``B`` (or ``B₀``).
        step_sizes: ``η`` candidates (default: ``config.step_size`` times 0.5, 1 and 2).
        num_iterations: ``T`` candidates (default: ``config.num_iterations``).
        num_repeats: Simulated runs per setting (different noise; the same across settings).
        seed: Seed of the simulated runs' noise and search (public randomness on public data).

    Returns:
        The ``PrivatePlan``: recommended config and report.

    Raises:
        ValueError: Naming the argument, for a bad candidate list, ``num_users < 2`` or a
            proxy that does not return per-user losses.
    """
    n = check_positive_int(num_users, "num_users (n)")
    if n < MIN_USERS:
        raise ValueError(f"num_users (n) must be at least {MIN_USERS}: the private run protects each of its n users.")
    quantiles = _checked_floats(clip_quantiles, "clip_quantiles", lambda v, name: check_probability(v, name, allow_one=True))
    etas = _checked_floats(
        (0.5 * config.step_size, config.step_size, 2.0 * config.step_size) if step_sizes is None else step_sizes,
        "step_sizes", lambda v, name: check_positive(v, name, allow_inf=False),
    )
    Ts = tuple(check_positive_int(T, "num_iterations") for T in ((config.num_iterations,) if num_iterations is None else num_iterations))
    if not Ts:
        raise ValueError("num_iterations must hold at least one value.")
    num_repeats = check_positive_int(num_repeats, "num_repeats")
    seeds = child_seeds([check_nonnegative_int(seed, "seed")], num_repeats)
    adaptive_clip = config.clip_bound == "adaptive"

    with warnings.catch_warnings():
        # the simulation's seeded noise is public randomness on public data, not a release
        warnings.filterwarnings("ignore", category=PrivacyWarning)
        probe = DPGIBO(dataclasses.replace(config, seed=seeds[0], privacy_budget_mu=None))
        points = probe.ask()  # public: depends on θ₀, the kernel and the search seed only
        losses = torch.as_tensor(proxy_objective(points)).detach().to(torch.float64)
        if losses.dim() != 2 or losses.shape[0] != points.shape[0]:
            raise ValueError(f"proxy_objective must return a q x n_p tensor of per-user losses, got shape {tuple(losses.shape)}.")
        n_p = losses.shape[1]
        check_per_user_losses(n_p, 1.0)
        gp = GradientGP(points, probe.kernel, probe.noise_variance, jitter=config.jitter)
        with torch.no_grad():
            estimates = (gp.gradient_weights(probe.theta) @ losses).transpose(0, 1)  # n_p x d, public
        norms = estimates.norm(dim=1)
        bounds = torch.quantile(norms, torch.tensor(quantiles, dtype=torch.float64)).tolist()
        if not all(b > 0 and math.isfinite(b) for b in bounds):
            raise ValueError(f"The proxy's gradient-estimate norm quantiles {bounds} are not all positive and finite.")
        trials = []
        for (gamma, bound), eta, T in itertools.product(zip(quantiles, bounds), etas, Ts):
            clip = {"clip_init": bound} if adaptive_clip else {"clip_bound": bound}
            signal = float(clip_rows(estimates, bound)[0].mean(0).norm())
            scores, noise_std = [], math.nan
            for r, s in enumerate(seeds):
                sim = simulation_config(config, n, n_p, step_size=eta, num_iterations=T, seed=s, **clip)
                release = DPGIBO(sim).run(proxy_objective, progress=False).release
                value = torch.as_tensor(proxy_objective(release.theta.unsqueeze(0))).to(torch.float64).mean()
                scores.append(float(value))
                if r == 0:
                    noise_std = release.noise_stds[0] if release.noise_stds else math.nan
            dim = points.shape[1]
            ratio = noise_std * math.sqrt(dim) / signal if signal > 0 else math.inf
            trials.append(PlanTrial(gamma, bound, eta, T, tuple(scores), noise_std, ratio))
    best = min(range(len(trials)), key=lambda i: trials[i].mean_proxy_loss)
    t = trials[best]
    chosen = {"clip_init": t.clip_bound} if adaptive_clip else {"clip_bound": t.clip_bound}
    recommended = dataclasses.replace(config, step_size=t.step_size, num_iterations=t.num_iterations, **chosen)
    return PrivatePlan(
        config=recommended, trials=trials, best=best, norm_quantiles=dict(zip(quantiles, bounds)),
        gradient_points=points.clone(), num_users=n, num_proxy_users=n_p,
    )
