r"""Batch rules: how many points each step evaluates and how they are searched, and the searches themselves.

``FixedBatches(size)`` (Sopa et al., Alg. 1) and ``AdaptiveBatches(tolerance, max_size)``
(Alg. 2: the smallest batch whose posterior gradient trace reaches the tolerance, at most
``max_size`` points). Both search ``"joint"`` (``optimize_acqf`` over the whole batch) or
``"greedy"`` (one point at a time), with ``maxiter`` L-BFGS-B iterations per restart (``None``:
BoTorch's default), and ``speed`` (``"fast"`` or ``"reference"``, below). Public computation
only: no batch rule spends budget. ``BatchRule`` is the family's protocol; the two rules share
the search's settings, not a class. A rule's ``search`` and ``speed`` name entries of the
allow-lists ``BATCH_SEARCHES`` (a ``SearchKind``: ``JointSearch``, ``GreedySearch``) and
``SEARCH_SPEEDS`` (a ``Speed``: ``FAST``, ``REFERENCE``); the names stay in the rule's fields
and ``spec()``, the objects do the work.

The searches are plain functions of the gradient GP, the iterate ``θ``, the local box, the
search generator and the ``optimize_acqf`` settings, so each can be tested without a loop:
``optimize_batch`` (one joint ``q``-batch of ``qGradientInformation``), ``greedy_batch`` (one
point at a time), ``adaptive_joint_batch`` (smallest sufficient ``q`` by bisection, Sopa et al.,
short version, Alg. 2) and ``search_batch``, the one entry point the rules call (a profiler or a
test may replace it).

Search speed (issue 33): ``FAST`` evaluates the acquisition's gradient in closed form where the
kernel allows (``gradient_gp.closed_form``) and starts a joint batch's L-BFGS-B from the previous
step's batch moved by the step (``moved_batch``) instead of from the best of ``raw_samples``
random batches; ``REFERENCE`` is the search as it was before (autograd, random initial
conditions). The warm run takes at most ``WARM_MAXITER`` (10) L-BFGS-B iterations, which at
d = 100 cuts the search's cost about fourfold (``reports/batch_search_speed.md``). ``FAST`` also
runs the search on one torch thread: its tensors are small and its L-BFGS-B sequential, so a
second thread mostly waits (4 to 35 times slower per evaluation on a loaded 2-core machine,
``docs/performance.md``). Both read only public data: the GP's inputs and the iterates.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def _check_search(rule: Any) -> None:
    r"""The search settings of a batch rule, checked and normalized (an integer ``maxiter``)."""
    if rule.search not in BATCH_SEARCHES:
        raise ValueError(f"batch_search must be one of {tuple(BATCH_SEARCHES)}, got {rule.search!r}.")
    if rule.speed not in SEARCH_SPEEDS:
        raise ValueError(f"acqf_speed must be one of {tuple(SEARCH_SPEEDS)}, got {rule.speed!r}.")
    if rule.maxiter is not None:
        object.__setattr__(rule, "maxiter", check_positive_int(rule.maxiter, "acqf_maxiter"))


@register("batches", "fixed")
@dataclass(frozen=True)
class FixedBatches(Strategy):
    r"""``size`` points per step (``None``: the projection's default, ``d + 1`` or ``k + 1``)."""

    size: int | None = None
    search: BatchSearch = "joint"
    maxiter: int | None = None
    speed: SearchSpeed = "fast"

    def __post_init__(self) -> None:
        if self.size is not None:
            object.__setattr__(self, "size", check_positive_int(self.size, "batch_size (b)"))
        _check_search(self)

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "size": self.size,
            "search": self.search,
            "maxiter": self.maxiter,
            "speed": self.speed,
        }

    @property
    def tolerance(self) -> float | None:
        r"""The adaptive rule's trace tolerance (none)."""
        return None

    def per_step(self, default: int) -> int:
        r"""The most points a step evaluates."""
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
        r"""The next batch (a ``q x d`` tensor; public); ``previous``: the last batch moved by the step."""
        size = self.per_step(default)
        return search_batch(
            gp,
            theta,
            bounds,
            generator,
            batch_search=BATCH_SEARCHES[self.search],
            batch_size=size,
            bias_tolerance=self.tolerance,
            max_batch_size=size,
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            basis=basis,
            maxiter=self.maxiter,
            speed=SEARCH_SPEEDS[self.speed],
            previous=previous,
        )


@register("batches", "adaptive")
@dataclass(frozen=True)
class AdaptiveBatches(Strategy):
    r"""Add points until ``tr Σ_D(θ) ≤ tolerance`` or ``max_size`` were added.

    Args:
        size: Must be ``None`` (kept first, so the fields read as before: ``size``, the search's
            ``search``, ``maxiter`` and ``speed`` as ``FixedBatches``'s, then these two).
        bias_tolerance: The tolerance (the paper's ε; here ε always means the privacy loss).
        max_size: ``b_max`` (``None``: the projection's default).
    """

    by_name_needs = "its bias_tolerance"

    size: int | None = None
    search: BatchSearch = "joint"
    maxiter: int | None = None
    speed: SearchSpeed = "fast"
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
        _check_search(self)

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
        return search_batch(
            gp,
            theta,
            bounds,
            generator,
            batch_search=BATCH_SEARCHES[self.search],
            batch_size=default,
            bias_tolerance=self.bias_tolerance,
            max_batch_size=self.per_step(default),
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            basis=basis,
            maxiter=self.maxiter,
            speed=SEARCH_SPEEDS[self.speed],
            previous=previous,
        )


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
    r"""How a batch search runs (issue 33; the module's docstring): ``FAST`` or ``REFERENCE``.

    Attributes:
        name: The rule's ``speed`` (``"fast"``, ``"reference"``).
        gradient: How ``qGradientInformation`` computes its gradient (``"auto"``: in closed form
            where the kernel allows; ``"autograd"``).
        threads: The torch threads the search runs on (``None``: as they are).
        warm: Start a joint batch's L-BFGS-B from the previous batch moved by the step, for at
            most ``WARM_MAXITER`` iterations.
    """

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
    r"""The ``2 x d`` box ``[θ − r, θ + r] ∩ Θ`` in which candidates are searched.

    Args:
        theta: The ``d`` iterate ``θ``.
        search_radius: A ``d`` tensor of half-widths ``r`` (units of ``θ``).
        bounds: The ``2 x d`` box ``Θ``.

    Returns:
        A ``2 x d`` tensor of lower and upper bounds.
    """
    lo = torch.maximum(theta - search_radius, bounds[0])
    hi = torch.minimum(theta + search_radius, bounds[1])
    return torch.stack([lo, hi])


def moved_batch(
    X: Tensor, batch_sizes: tuple[int, ...] | list[int], iterates: tuple[Tensor, ...] | list[Tensor]
) -> Tensor | None:
    r"""The last batch of ``X`` moved by the last step, ``X_{t−1} + (θ_t − θ_{t−1})`` (public).

    Args:
        X: The ``N x d`` evaluated points, batch after batch.
        batch_sizes: The size of each batch of ``X``.
        iterates: ``θ_0, …, θ_t``.

    Returns:
        A ``b x d`` tensor, or ``None`` before the first step or after an empty batch.
    """
    if not batch_sizes or batch_sizes[-1] == 0 or len(iterates) < 2:
        return None
    return X[X.shape[0] - batch_sizes[-1] :] + (iterates[-1] - iterates[-2])


def posterior_trace(gp: GradientGP, theta: Tensor, X: Tensor | None = None, basis: Tensor | None = None) -> float:
    r"""``tr Σ_D(θ)``, the posterior gradient variance, after also conditioning on ``X``.

    Args:
        gp: The ``GradientGP`` on the evaluated points ``D``.
        theta: The ``d`` iterate ``θ``.
        X: An optional ``q x d`` batch to condition on first.
        basis: An optional ``d x k`` ``Ṽ``: the projected trace ``tr(ṼᵀΣṼ)`` instead.

    Returns:
        The trace as a float.
    """
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

    ``optimize_acqf`` draws from torch's global generator; it runs under a seed drawn
    from ``generator``, so the search is reproducible (and resumable) without touching
    the caller's random state.

    Args:
        gp: The ``GradientGP`` on the evaluated points ``D``.
        theta: The ``d`` iterate ``θ``.
        bounds: The ``2 x d`` search box (usually ``local_bounds``).
        q: Batch size.
        generator: The search generator (public randomness); one draw per call.
        num_restarts, raw_samples: Passed to ``optimize_acqf``.
        warm_start: An optional ``q x d`` batch optimized alongside the random restarts,
            so the result is at least as informative as it (up to the optimizer).
        basis: An optional public ``d x k`` ``Ṽ``: maximize the reduction of the projected
            trace ``tr(ṼᵀΣṼ)`` (Kairouz et al.'s subspaces, projected acquisition, spec A5).
        maxiter: An optional cap on the L-BFGS-B iterations of each restart (BoTorch's
            ``options={"maxiter": ...}``); ``None``: BoTorch's default.
        start: An optional ``q x d`` batch (projected into the box) from which the one
            L-BFGS-B run starts instead of the restarts drawn from ``raw_samples`` (which are
            then not drawn); ``warm_start`` is ignored then. With ``FAST`` that run takes at
            most ``WARM_MAXITER`` iterations.
        speed: ``FAST``: the acquisition's gradient in closed form where the kernel allows, on
            one thread; ``REFERENCE``: by autograd (a ``Speed``; see the module).

    Returns:
        A ``q x d`` tensor.
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

    Greedy is myopic: a lone point carries little gradient information, so a greedy
    batch usually leaves a larger ``tr Σ`` than a joint batch of the same size.

    Args:
        gp, theta, bounds, generator, num_restarts, raw_samples, basis, maxiter, speed: As in
            ``optimize_batch``.
        num_points: The most points to add (``b`` or ``b_max``).
        tolerance: The bias tolerance; if given, stop as soon as ``tr Σ ≤ tolerance``
            (possibly at 0 points).

    Returns:
        A ``q x d`` tensor, ``0 ≤ q ≤ num_points``.
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
    sufficient batch found so far.

    Args:
        gp, theta, bounds, generator, num_restarts, raw_samples, basis, maxiter, speed: As in
            ``optimize_batch``.
        tolerance: The bias tolerance, ``> 0``.
        max_batch_size: ``b_max``.
        start: An optional start of the ``b_max`` batch's search (``optimize_batch``'s
            ``start``), used when it has ``b_max`` points.

    Returns:
        A ``q x d`` tensor, ``0 ≤ q ≤ b_max``.
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


class JointSearch:
    r"""The whole batch at once: ``optimize_batch`` of ``size`` points (started from ``start`` when it
    has ``size`` points), or with a tolerance ``adaptive_joint_batch`` up to ``size``."""

    def search(
        self,
        gp: GradientGP,
        theta: Tensor,
        bounds: Tensor,
        generator: torch.Generator,
        size: int,
        tolerance: float | None,
        options: SearchOptions,
        start: Tensor | None,
    ) -> Tensor:
        if tolerance is not None:
            return adaptive_joint_batch(gp, theta, bounds, tolerance, size, generator, start=start, **options)
        start = start if start is not None and start.shape[0] == size else None
        return optimize_batch(gp, theta, bounds, size, generator, start=start, **options)


class GreedySearch:
    r"""One point at a time (``greedy_batch``), up to ``size`` points or the tolerance; never warm-started."""

    def search(
        self,
        gp: GradientGP,
        theta: Tensor,
        bounds: Tensor,
        generator: torch.Generator,
        size: int,
        tolerance: float | None,
        options: SearchOptions,
        start: Tensor | None,
    ) -> Tensor:
        return greedy_batch(gp, theta, bounds, size, generator, tolerance=tolerance, **options)


#: How a batch is searched (``BATCH_SEARCHES``): each kind's ``search`` gives ``size`` points (with a
#: ``tolerance``: at most ``size``, stopping at ``tr Σ ≤ tolerance``), started from ``start`` where it can be.
SearchKind = JointSearch | GreedySearch
#: The allow-lists of a rule's ``search`` and ``speed``: name → the object that does the work.
BATCH_SEARCHES: dict[str, SearchKind] = {"joint": JointSearch(), "greedy": GreedySearch()}
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
    r"""The next batch: fixed ``b`` points (Alg. 1) or adaptive up to ``b_max`` (Alg. 2).

    Args:
        gp, theta, bounds, generator, num_restarts, raw_samples, maxiter: As in ``optimize_batch``.
        batch_search: A ``SearchKind`` (``BATCH_SEARCHES["joint"]`` or ``["greedy"]``).
        batch_size: ``b`` of fixed batches (ignored when ``bias_tolerance`` is given).
        bias_tolerance: Tolerance of adaptive batches (``tr Σ ≤ bias_tolerance``), or
            ``None`` for fixed batches.
        max_batch_size: ``b_max`` of adaptive batches.
        basis: An optional public ``d x k`` ``Ṽ`` for the projected acquisition and trace.
        speed: A ``Speed`` (``FAST`` or ``REFERENCE``; see the module).
        previous: The previous step's batch moved by the step (``moved_batch``), or ``None``:
            with ``FAST``, a joint batch of its size starts from it (public).

    Returns:
        A ``q x d`` tensor.
    """
    options = SearchOptions(
        num_restarts=num_restarts, raw_samples=raw_samples, basis=basis, maxiter=maxiter, speed=speed
    )
    size = batch_size if bias_tolerance is None else max_batch_size
    return batch_search.search(gp, theta, bounds, generator, size, bias_tolerance, options, speed.start(previous))
