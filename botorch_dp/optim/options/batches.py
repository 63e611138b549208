r"""Batch rules: how many points each step evaluates and how they are searched, and the searches themselves.

``FixedBatches(size)`` (Sopa et al., Alg. 1) and ``AdaptiveBatches(tolerance, max_size)`` (Alg. 2:
the smallest batch whose posterior gradient trace reaches the tolerance). Both search ``"joint"``
(``optimize_acqf`` over the whole batch) or ``"greedy"`` (one point at a time), with ``maxiter``
L-BFGS-B iterations per restart (``None``: BoTorch's default) at a ``speed``; the names index the
allow-lists ``BATCH_SEARCHES`` and ``SEARCH_SPEEDS``, whose objects do the work. Public
computation only: no batch rule spends budget. The searches are plain functions of public data
(the GP's inputs and the iterates), testable without a loop; ``search_batch`` is the one entry
point the rules call (a profiler or a test may replace it).

Search speed (issue 33): ``FAST`` computes the acquisition's gradient in closed form where the
kernel allows and starts a joint batch's L-BFGS-B from the previous batch moved by the step, for
at most ``WARM_MAXITER`` iterations (about fourfold cheaper at d = 100,
``reports/batch_search_speed.md``), on one torch thread (a second one mostly waits,
``docs/performance.md``); ``REFERENCE`` is the search as it was before (autograd, random starts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypedDict

import torch
from botorch.utils.sampling import manual_seed
from torch import Tensor

from botorch_dp.acquisition import AcquisitionGradient, qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.privacy.checks import check_positive, check_positive_int
from botorch_dp.utils import project_to_box, torch_threads

__all__ = ["AdaptiveBatches", "BatchRule", "FixedBatches", "batch_rule"]

#: The names a rule's ``search`` and ``speed`` take (the keys of ``BATCH_SEARCHES`` and ``SEARCH_SPEEDS``).
BatchSearch = Literal["joint", "greedy"]
SearchSpeed = Literal["fast", "reference"]


class BatchRule(StrategyLike, Protocol):
    r"""How many points each step evaluates and how they are searched (public computation only)."""

    @property
    def tolerance(self) -> float | None:
        r"""The trace tolerance the batches are searched to (``None``: a fixed size)."""
        ...

    def per_step(self, default: int) -> int:
        r"""The most points a step evaluates (``default``: the projection's suggestion)."""
        ...

    def select(
        self,
        gp: GradientGP,
        theta: Tensor,
        bounds: Tensor,
        generator: torch.Generator,
        *,
        basis: Tensor | None,
        default: int,
        num_restarts: int,
        raw_samples: int,
        previous: Tensor | None = None,
    ) -> Tensor:
        r"""The next batch around ``θ_t`` (a ``q x d`` tensor in ``bounds``; public)."""
        ...


@dataclass(frozen=True)
class _SearchedBatches(Strategy):
    r"""What the two rules share: the search's settings (checked here) and the search itself."""

    size: int | None = None
    search: BatchSearch = "joint"
    maxiter: int | None = None
    speed: SearchSpeed = "fast"
    #: The search's speed may differ on resume: public computation, it moves the next batches, not
    #: what is clipped or charged (its default changed in issue 33: a config built today resumes older runs).
    resume_tolerates = MappingProxyType({"speed": "any"})

    def __post_init__(self) -> None:
        if self.search not in BATCH_SEARCHES:
            raise ValueError(f"batch_search must be one of {tuple(BATCH_SEARCHES)}, got {self.search!r}.")
        if self.speed not in SEARCH_SPEEDS:
            raise ValueError(f"acqf_speed must be one of {tuple(SEARCH_SPEEDS)}, got {self.speed!r}.")
        if self.maxiter is not None:
            object.__setattr__(self, "maxiter", check_positive_int(self.maxiter, "acqf_maxiter"))

    @property
    def tolerance(self) -> float | None:
        return None

    def per_step(self, default: int) -> int:
        return self.size if self.size is not None else default

    def select(
        self,
        gp: GradientGP,
        theta: Tensor,
        bounds: Tensor,
        generator: torch.Generator,
        *,
        basis: Tensor | None,
        default: int,
        num_restarts: int,
        raw_samples: int,
        previous: Tensor | None = None,
    ) -> Tensor:
        r"""The next batch (public); ``previous``: the last batch moved by the step."""
        return search_batch(
            gp,
            theta,
            bounds,
            generator,
            batch_search=BATCH_SEARCHES[self.search],
            batch_size=default if self.size is None else self.size,
            bias_tolerance=self.tolerance,
            max_batch_size=self.per_step(default),
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            basis=basis,
            maxiter=self.maxiter,
            speed=SEARCH_SPEEDS[self.speed],
            previous=previous,
        )


@register("batches", "fixed")
@dataclass(frozen=True)
class FixedBatches(_SearchedBatches):
    r"""``size`` points per step (``None``: the projection's default, ``d + 1`` or ``k + 1``)."""

    def __post_init__(self) -> None:
        if self.size is not None:
            object.__setattr__(self, "size", check_positive_int(self.size, "batch_size (b)"))
        super().__post_init__()


@register("batches", "adaptive")
@dataclass(frozen=True)
class AdaptiveBatches(_SearchedBatches):
    r"""Add points until ``tr Σ_D(θ) ≤ bias_tolerance`` (the paper's ε; here ε always means the
    privacy loss) or ``max_size`` (``b_max``; ``None``: the projection's default) were added.
    ``size`` must be ``None`` (kept first, so the fields read as ``FixedBatches``'s, then these two)."""

    by_name_needs = "its bias_tolerance"

    bias_tolerance: float = 0.1
    max_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "bias_tolerance", check_positive(self.bias_tolerance, "bias_tolerance", allow_inf=False)
        )
        if self.max_size is not None:
            object.__setattr__(self, "max_size", check_positive_int(self.max_size, "max_batch_size (b_max)"))
        if self.size is not None:
            raise ValueError("Give either batch_size (fixed) or bias_tolerance (adaptive), not both.")
        super().__post_init__()

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "bias_tolerance": self.bias_tolerance,
            "max_size": self.max_size,
            "search": self.search,
            "maxiter": self.maxiter,
            "speed": self.speed,
        }

    @property
    def tolerance(self) -> float | None:
        return self.bias_tolerance

    def per_step(self, default: int) -> int:
        return self.max_size if self.max_size is not None else default


def batch_rule(
    size: int | None = None,
    *,
    bias_tolerance: float | None = None,
    max_size: int | None = None,
    search: BatchSearch = "joint",
    maxiter: int | None = None,
    speed: SearchSpeed = "fast",
) -> BatchRule:
    r"""``FixedBatches(size, ...)``, or ``AdaptiveBatches`` when a ``bias_tolerance`` is given
    (for code that chooses between the two rules by a value that may be ``None``)."""
    if bias_tolerance is None:
        if max_size is not None:
            raise ValueError("max_batch_size (b_max) is only used with bias_tolerance (adaptive batches).")
        return FixedBatches(size, search, maxiter, speed)
    return AdaptiveBatches(size, search, maxiter, speed, bias_tolerance=bias_tolerance, max_size=max_size)


# ----------------------------------------------------------------------- the searches
#: With ``FAST``, the most L-BFGS-B iterations of a search started from ``start`` (the previous
#: batch moved by the step), below ``maxiter`` if that is larger. The warm start is already close:
#: most of the gain comes in the first iterations, and at d = 100 each iteration costs two triangular
#: solves with the ``N x N`` factor (``docs/performance.md``). ``None``: no cap beyond ``maxiter``.
WARM_MAXITER: int | None = 10


@dataclass(frozen=True)
class Speed:
    r"""How a batch search runs (the module's docstring): ``gradient`` is how ``qGradientInformation``
    computes its gradient, ``threads`` the torch threads (``None``: as they are), ``warm`` whether a
    joint batch starts from the previous batch moved by the step."""

    name: str
    gradient: AcquisitionGradient
    threads: int | None
    warm: bool

    def start(self, previous: Tensor | None) -> Tensor | None:
        r"""The batch a joint search starts from: ``previous`` (the last batch moved by the step) when warm."""
        return previous if self.warm else None

    def maxiter(self, maxiter: int | None, start: Tensor | None) -> int | None:
        r"""The L-BFGS-B cap of a search (``None``: BoTorch's default): a warm run from ``start`` takes at
        most ``WARM_MAXITER`` iterations, or ``maxiter`` if that is smaller."""
        if not self.warm or start is None or WARM_MAXITER is None:
            return maxiter
        return WARM_MAXITER if maxiter is None else min(maxiter, WARM_MAXITER)


FAST = Speed("fast", gradient="auto", threads=1, warm=True)
REFERENCE = Speed("reference", gradient="autograd", threads=None, warm=False)


class SearchOptions(TypedDict):
    r"""The keyword settings that ``search_batch`` and ``adaptive_joint_batch`` pass on unchanged
    to each batch rule (``optimize_batch``, ``greedy_batch``)."""

    num_restarts: int
    raw_samples: int
    basis: Tensor | None
    maxiter: int | None
    speed: Speed


def optimize_acqf(*args: Any, **kwargs: Any) -> tuple[Tensor, Tensor | None]:
    r"""BoTorch's ``optimize_acqf``, imported on first use: ``botorch.optim`` loads
    ``scipy.optimize`` and BoTorch's acquisition functions, which importing the package
    need not pay for (issue 33, item 4). A module attribute, so a profiler can wrap it."""
    from botorch.optim import optimize_acqf as botorch_optimize_acqf

    return botorch_optimize_acqf(*args, **kwargs)


def local_bounds(theta: Tensor, search_radius: Tensor, bounds: Tensor) -> Tensor:
    r"""The ``2 x d`` box ``[θ − r, θ + r] ∩ Θ`` in which candidates are searched (``r``: ``search_radius``)."""
    lo = torch.maximum(theta - search_radius, bounds[0])
    hi = torch.minimum(theta + search_radius, bounds[1])
    return torch.stack([lo, hi])


def moved_batch(
    X: Tensor, batch_sizes: tuple[int, ...] | list[int], iterates: tuple[Tensor, ...] | list[Tensor]
) -> Tensor | None:
    r"""The last batch of ``X`` (the evaluated points, batch after batch) moved by the last step,
    ``X_{t−1} + (θ_t − θ_{t−1})`` (public); ``None`` before the first step or after an empty batch."""
    if not batch_sizes or batch_sizes[-1] == 0 or len(iterates) < 2:
        return None
    return X[X.shape[0] - batch_sizes[-1] :] + (iterates[-1] - iterates[-2])


def posterior_trace(gp: GradientGP, theta: Tensor, X: Tensor | None = None, basis: Tensor | None = None) -> float:
    r"""``tr Σ_D(θ)``, the posterior gradient variance, after also conditioning on a batch ``X``; with
    a ``d x k`` ``basis`` ``Ṽ`` the projected trace ``tr(ṼᵀΣṼ)``."""
    with torch.no_grad():
        gp = gp if X is None or X.shape[0] == 0 else gp.condition_on(X)
        return float(gp.posterior_trace(theta, basis))


def optimize_batch(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    q: int,
    generator: torch.Generator,
    *,
    num_restarts: int,
    raw_samples: int,
    warm_start: Tensor | None = None,
    basis: Tensor | None = None,
    maxiter: int | None = None,
    start: Tensor | None = None,
    speed: Speed = REFERENCE,
) -> Tensor:
    r"""Maximize the gradient information ``qGradientInformation`` of a ``q``-batch in a box.

    ``optimize_acqf`` runs under a seed drawn once from the (public) search ``generator``, so the
    search is reproducible and resumable without touching the caller's random state.
    ``warm_start``: a ``q x d`` batch optimized alongside the random restarts; ``start``: a batch
    from which the one L-BFGS-B run starts instead (no restarts are drawn; ``warm_start`` is
    ignored); ``basis``: a public ``d x k`` ``Ṽ`` whose projected trace ``tr(ṼᵀΣṼ)`` is reduced
    (spec A5); ``maxiter``: the L-BFGS-B cap of each restart (``None``: BoTorch's default).
    """
    from botorch.optim.initializers import gen_batch_initial_conditions

    acqf = qGradientInformation(gp, theta, basis=basis, gradient=speed.gradient)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=generator.device))
    maxiter = speed.maxiter(maxiter, start)
    options = {"seed": seed} if maxiter is None else {"seed": seed, "maxiter": maxiter}
    with manual_seed(seed), torch_threads(speed.threads):
        initial = None
        if start is not None:
            initial = project_to_box(start, bounds).unsqueeze(0).to(theta)
        elif warm_start is not None:
            initial = gen_batch_initial_conditions(
                acqf, bounds, q=q, num_restarts=num_restarts, raw_samples=raw_samples, options={"seed": seed}
            )
            warm = project_to_box(warm_start, bounds)
            initial = torch.cat([warm.unsqueeze(0).to(initial), initial])
        cand, _ = optimize_acqf(
            acqf,
            bounds=bounds,
            q=q,
            num_restarts=num_restarts if initial is None else initial.shape[0],
            raw_samples=raw_samples,
            options=options,
            batch_initial_conditions=initial,
        )
    return cand.detach()


def greedy_batch(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    num_points: int,
    generator: torch.Generator,
    *,
    num_restarts: int,
    raw_samples: int,
    tolerance: float | None = None,
    basis: Tensor | None = None,
    maxiter: int | None = None,
    speed: Speed = REFERENCE,
) -> Tensor:
    r"""Up to ``num_points`` points chosen one at a time, each conditioned on those before it.

    With a ``tolerance``, stop as soon as ``tr Σ ≤ tolerance`` (possibly at 0 points). Greedy is
    myopic: it usually leaves a larger ``tr Σ`` than a joint batch of the same size.
    """
    chosen = [theta.new_empty(0, theta.shape[-1])]
    while len(chosen) - 1 < num_points and (tolerance is None or posterior_trace(gp, theta, basis=basis) > tolerance):
        x = optimize_batch(
            gp,
            theta,
            bounds,
            1,
            generator,
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            basis=basis,
            maxiter=maxiter,
            speed=speed,
        )
        gp = gp.condition_on(x)
        chosen.append(x)
    return torch.cat(chosen)


def adaptive_joint_batch(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    tolerance: float,
    max_batch_size: int,
    generator: torch.Generator,
    *,
    num_restarts: int,
    raw_samples: int,
    basis: Tensor | None = None,
    maxiter: int | None = None,
    speed: Speed = REFERENCE,
    start: Tensor | None = None,
) -> Tensor:
    r"""The smallest ``q ≤ b_max`` whose jointly optimized batch reaches ``tr Σ ≤ tolerance``.

    The empty batch is returned if ``tr Σ_D(θ) ≤ tolerance`` already. Otherwise the batch of size
    ``b_max`` is optimized first; if even it cannot reach the tolerance, it is taken as it is (one
    optimization, the usual case early in a run). Otherwise the smallest sufficient ``q``
    is found by bisection, each size warm-started from the leading points of the smallest
    sufficient batch found so far. ``start`` starts the ``b_max`` batch's search when it has
    ``b_max`` points.
    """
    if posterior_trace(gp, theta, basis=basis) <= tolerance:
        return theta.new_empty(0, theta.shape[-1])
    options = SearchOptions(
        num_restarts=num_restarts, raw_samples=raw_samples, basis=basis, maxiter=maxiter, speed=speed
    )
    hi = max_batch_size
    start = start if start is not None and start.shape[0] == hi else None
    best = optimize_batch(gp, theta, bounds, hi, generator, start=start, **options)
    if posterior_trace(gp, theta, best, basis) > tolerance:
        return best
    lo = 0  # the empty batch is known not to suffice
    while hi - lo > 1:
        mid = (lo + hi) // 2
        candidate = optimize_batch(gp, theta, bounds, mid, generator, warm_start=best[:mid], **options)
        if posterior_trace(gp, theta, candidate, basis) <= tolerance:
            hi, best = mid, candidate
        else:
            lo = mid
    return best


def joint_search(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    generator: torch.Generator,
    size: int,
    tolerance: float | None,
    options: SearchOptions,
    start: Tensor | None,
) -> Tensor:
    r"""The whole batch at once: ``optimize_batch`` of ``size`` points (started from ``start`` when it
    has ``size`` points), or with a tolerance ``adaptive_joint_batch`` up to ``size``."""
    if tolerance is not None:
        return adaptive_joint_batch(gp, theta, bounds, tolerance, size, generator, start=start, **options)
    start = start if start is not None and start.shape[0] == size else None
    return optimize_batch(gp, theta, bounds, size, generator, start=start, **options)


def greedy_search(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    generator: torch.Generator,
    size: int,
    tolerance: float | None,
    options: SearchOptions,
    start: Tensor | None,
) -> Tensor:
    r"""One point at a time (``greedy_batch``), up to ``size`` points or the tolerance; never warm-started."""
    return greedy_batch(gp, theta, bounds, size, generator, tolerance=tolerance, **options)


#: How a batch is searched (``BATCH_SEARCHES``): a kind gives ``size`` points (with a ``tolerance``: at
#: most ``size``, stopping at ``tr Σ ≤ tolerance``), started from ``start`` where it can be.
SearchKind = Callable[
    [GradientGP, Tensor, Tensor, torch.Generator, int, float | None, SearchOptions, Tensor | None], Tensor
]
#: The allow-lists of a rule's ``search`` and ``speed``: name → what does the work.
BATCH_SEARCHES: dict[str, SearchKind] = {"joint": joint_search, "greedy": greedy_search}
SEARCH_SPEEDS: dict[str, Speed] = {speed.name: speed for speed in (FAST, REFERENCE)}


def search_batch(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    generator: torch.Generator,
    *,
    batch_search: SearchKind,
    batch_size: int,
    bias_tolerance: float | None,
    max_batch_size: int,
    num_restarts: int,
    raw_samples: int,
    basis: Tensor | None = None,
    maxiter: int | None = None,
    speed: Speed = REFERENCE,
    previous: Tensor | None = None,
) -> Tensor:
    r"""The next batch: fixed ``batch_size`` points (Alg. 1), or with a ``bias_tolerance`` adaptive up
    to ``max_batch_size`` (Alg. 2). ``previous``: the previous batch moved by the step
    (``moved_batch``), from which a warm ``speed`` starts a joint batch of its size."""
    options = SearchOptions(
        num_restarts=num_restarts, raw_samples=raw_samples, basis=basis, maxiter=maxiter, speed=speed
    )
    size = batch_size if bias_tolerance is None else max_batch_size
    return batch_search(gp, theta, bounds, generator, size, bias_tolerance, options, speed.start(previous))
