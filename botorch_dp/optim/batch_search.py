r"""Batch search: which points DP-GIBO evaluates next (public: depends on ``D``, ``θ`` only).

Plain functions of the gradient GP, the iterate ``θ``, the local box, the search generator
and the ``optimize_acqf`` settings, so each rule can be tested without a loop:
``optimize_batch`` (one joint ``q``-batch of ``qGradientInformation``), ``greedy_batch``
(one point at a time), ``adaptive_joint_batch`` (smallest sufficient ``q`` by bisection,
Sopa et al., short version, Alg. 2) and ``search_batch``, which picks among them as ``DPGIBO.ask`` does.

Search speed (issue 33, ``SEARCH_SPEEDS``): ``"fast"`` evaluates the acquisition's gradient in
closed form where the kernel allows (``gradient_gp.closed_form``) and starts a joint batch's
L-BFGS-B from the previous step's batch moved by the step (``moved_batch``) instead of from the
best of ``raw_samples`` random batches; ``"reference"`` is the search as it was before (autograd,
random initial conditions). The warm run takes at most ``WARM_MAXITER`` (10) L-BFGS-B iterations,
which at d = 100 cuts the search's cost about fourfold (``reports/batch_search_speed.md``).
``"fast"`` also runs the search on one torch thread: its tensors are
small and its L-BFGS-B sequential, so a second thread mostly waits (4 to 35 times slower per
evaluation on a loaded 2-core machine, ``docs/performance.md``). Both read only public
data: the GP's inputs and the iterates.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, get_args

import torch
from botorch.utils.sampling import manual_seed
from torch import Tensor

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.utils import project_to_box, torch_threads

BatchSearch = Literal["joint", "greedy"]
BATCH_SEARCHES: tuple[str, ...] = get_args(BatchSearch)
SearchSpeed = Literal["fast", "reference"]
SEARCH_SPEEDS: tuple[str, ...] = get_args(SearchSpeed)
#: With ``speed="fast"``, the most L-BFGS-B iterations of a search started from ``start`` (the previous
#: batch moved by the step), below ``maxiter`` if that is larger. The warm start is already close:
#: most of the gain comes in the first iterations, and at d = 100 each iteration costs two triangular
#: solves with the ``N x N`` factor (``docs/performance.md``). ``None``: no cap beyond ``maxiter``.
WARM_MAXITER: int | None = 10


class _SearchOptions(TypedDict):
    r"""The keyword settings that ``search_batch`` and ``adaptive_joint_batch`` pass on unchanged
    to each batch rule (``optimize_batch``, ``greedy_batch``)."""

    num_restarts: int
    raw_samples: int
    basis: Tensor | None
    maxiter: int | None
    speed: SearchSpeed


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
    speed: SearchSpeed = "reference",
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
            then not drawn); ``warm_start`` is ignored then. With ``speed="fast"`` that run
            takes at most ``WARM_MAXITER`` iterations.
        speed: ``"fast"``: the acquisition's gradient in closed form where the kernel allows;
            ``"reference"``: by autograd (see the module).

    Returns:
        A ``q x d`` tensor.
    """
    from botorch.optim.initializers import gen_batch_initial_conditions

    acqf = qGradientInformation(gp, theta, basis=basis, gradient="auto" if speed == "fast" else "autograd")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=generator.device))
    if speed == "fast" and start is not None and WARM_MAXITER is not None:
        maxiter = WARM_MAXITER if maxiter is None else min(maxiter, WARM_MAXITER)
    options = {"seed": seed} if maxiter is None else {"seed": seed, "maxiter": maxiter}
    with manual_seed(seed), torch_threads(1 if speed == "fast" else None):
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
    speed: SearchSpeed = "reference",
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
    speed: SearchSpeed = "reference",
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
    options = _SearchOptions(
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


def search_batch(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    generator: torch.Generator,
    *,
    batch_search: BatchSearch,
    batch_size: int,
    bias_tolerance: float | None,
    max_batch_size: int,
    num_restarts: int,
    raw_samples: int,
    basis: Tensor | None = None,
    maxiter: int | None = None,
    speed: SearchSpeed = "reference",
    previous: Tensor | None = None,
) -> Tensor:
    r"""The next batch: fixed ``b`` points (Alg. 1) or adaptive up to ``b_max`` (Alg. 2).

    Args:
        gp, theta, bounds, generator, num_restarts, raw_samples, maxiter: As in ``optimize_batch``.
        batch_search: ``"joint"`` or ``"greedy"``.
        batch_size: ``b`` of fixed batches (ignored when ``bias_tolerance`` is given).
        bias_tolerance: Tolerance of adaptive batches (``tr Σ ≤ bias_tolerance``), or
            ``None`` for fixed batches.
        max_batch_size: ``b_max`` of adaptive batches.
        basis: An optional public ``d x k`` ``Ṽ`` for the projected acquisition and trace.
        speed: ``"fast"`` or ``"reference"`` (see the module).
        previous: The previous step's batch moved by the step (``moved_batch``), or ``None``:
            with ``speed="fast"``, a joint batch of its size starts from it (public).

    Returns:
        A ``q x d`` tensor.
    """
    options = _SearchOptions(
        num_restarts=num_restarts, raw_samples=raw_samples, basis=basis, maxiter=maxiter, speed=speed
    )
    joint = batch_search == "joint"
    start = previous if speed == "fast" else None
    if bias_tolerance is not None and joint:
        return adaptive_joint_batch(
            gp, theta, bounds, bias_tolerance, max_batch_size, generator, start=start, **options
        )
    if bias_tolerance is not None:
        return greedy_batch(gp, theta, bounds, max_batch_size, generator, tolerance=bias_tolerance, **options)
    if joint:
        start = start if start is not None and start.shape[0] == batch_size else None
        return optimize_batch(gp, theta, bounds, batch_size, generator, start=start, **options)
    return greedy_batch(gp, theta, bounds, batch_size, generator, **options)
