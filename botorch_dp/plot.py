r"""Plots of a private run: ε spent, loss and the iterate path against iterations.

Everything drawn here is public: the ledger's recorded ``μ``'s, the released iterates and
evaluation points, the released noisy values, or a loss computed on a PUBLIC proxy
objective that the caller supplies. Nothing reads the sensitive per-user losses a
``DPGIBO`` holds. matplotlib is imported only when a function draws.

Example::

    opt = DPGIBO(config)
    result = opt.run(objective)
    fig = botorch_dp.plot.plot_run(opt, proxy=public_objective)
    fig.savefig("run.png")
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.ledger import PrivacyLedger, parse_release_key, release_key
from botorch_dp.privacy.ledger.events import Gaussian, PureDP, validation_parts

if TYPE_CHECKING:  # pragma: no cover
    from botorch_dp.objectives.search_space import SearchSpace
    from botorch_dp.optim.dp_gibo import DPGIBO
    from botorch_dp.optim.results import PrivateRelease

__all__ = ["SpendingPoint", "epsilon_spent", "plot_privacy", "plot_loss", "plot_iterate_path", "plot_run"]


@dataclass(frozen=True)
class SpendingPoint:
    r"""The validation spending after one stage of releases.

    Attributes:
        label: The stage: ``"step-0003"`` for every release of step 3 (its norm, gradient,
            clip-bound or preconditioner releases together), or a key such as ``"select"``.
        iteration: Steps completed after this stage (``t + 1`` for ``step-t``; a stage that
            is not a step keeps the previous count).
        mu: Total GDP ``μ`` spent up to and including this stage (NaN when the releases
            composed include one known only by its RDP curve, e.g. a DP-HyPO run).
        epsilon: ``ε`` at the requested ``δ`` for ``mu`` (with NaN ``mu``: the RDP
            conversion of the summed curves on the ledger's order grid, as
            ``ledger.validation.epsilon``).
    """

    label: str
    iteration: int
    mu: float
    epsilon: float


def epsilon_spent(ledger: PrivacyLedger, delta: float, *, run_id: str | None = None) -> list[SpendingPoint]:
    r"""Cumulative validation spending, stage by stage, in the ledger's recording order.

    Releases whose keys share a ``step-t`` prefix form one stage; the others (e.g. the
    private selection ``"select"``) are stages of their own. Composition is the ledger's
    (``μ = sqrt(Σ μ_j²)``; pure-ε releases enter as their GDP charge; when the releases
    shown include one known only by its RDP curve, every stage is composed in RDP instead,
    ``ledger.validation.release_curves`` summed and converted).

    Args:
        ledger: The ``PrivacyLedger`` the run recorded in.
        delta: ``δ`` in (0, 1) at which to report ``ε``.
        run_id: Only this run's releases; default every run in the ledger (what the
            validation users paid).

    Returns:
        One ``SpendingPoint`` per stage (empty before the first release).
    """
    if not isinstance(ledger, PrivacyLedger):
        raise TypeError(f"ledger must be a PrivacyLedger, got {type(ledger).__name__}.")
    if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}.")
    if any(run_id is None or rid == run_id for rid, _ in ledger.validation.mechanisms()):
        return _rdp_spent(ledger, delta, run_id)
    stages: dict[tuple[str, str], list[float]] = {}
    steps: dict[str, int] = {}  # a step stage's label -> steps completed after it
    for record in ledger.validation.records(run_id):  # every release, a repeated one twice
        rid, key, event = validation_parts(record)
        if not isinstance(event, (Gaussian, PureDP)):  # RDP entries went to _rdp_spent above
            raise TypeError(f"Not a GDP release: {event!r}.")
        label = _stage(key, steps)
        stages.setdefault((rid, label), []).append(event.mu)
    points, spent, iteration = [], [], 0
    for (_, label), mus in stages.items():
        spent.extend(mus)
        iteration = steps.get(label, iteration)
        mu = compose_gdp(spent)
        points.append(SpendingPoint(label, iteration, mu, gdp_epsilon(mu, delta)))
    return points


def _stage(key: str, steps: dict[str, int]) -> str:
    r"""The stage label of a release key (``step-t`` for ``step-t/...``), noting a step's count in ``steps``."""
    step, _ = parse_release_key(key)
    if step is None:
        return key
    label = release_key(step, "grad")  # the step's bare key, "step-t"
    steps[label] = step + 1
    return label


def _rdp_spent(ledger: PrivacyLedger, delta: float, run_id: str | None) -> list[SpendingPoint]:
    r"""``epsilon_spent`` composed in RDP: the stages' summed curves, converted on the grid."""
    stages: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    steps: dict[str, int] = {}
    for rid, key, curve in ledger.validation.release_curves():
        if run_id is None or rid == run_id:
            stages.setdefault((rid, _stage(key, steps)), []).append(curve)
    points, total, iteration = [], [0.0] * len(PrivacyLedger.RDP_ORDERS), 0
    for (_, label), curves in stages.items():
        for curve in curves:
            total = [t + c for t, c in zip(total, curve, strict=True)]
        iteration = steps.get(label, iteration)
        epsilon = rdp_curve_epsilon(total, PrivacyLedger.RDP_ORDERS, delta)[0]
        points.append(SpendingPoint(label, iteration, math.nan, epsilon))
    return points


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(5, 3.5))[1]


def plot_privacy(
    source: DPGIBO | PrivacyLedger, *, delta: float | None = None, run_id: str | None = None, ax: Any = None
) -> Any:
    r"""``ε`` spent against iterations (a step line, one point per stage), with the budget.

    Args:
        source: A ``DPGIBO`` (its ledger and ``config.target_delta``) or a ``PrivacyLedger``.
        delta: ``δ`` for ``ε``; default the optimizer's ``target_delta`` (required for a
            bare ledger).
        run_id: Only this run's releases; default all runs in the ledger.
        ax: A matplotlib ``Axes`` to draw on; default a new figure.

    Returns:
        The ``Axes``.
    """
    ledger = source if isinstance(source, PrivacyLedger) else source.ledger
    if delta is None:
        if isinstance(source, PrivacyLedger):
            raise ValueError("delta is required when plotting a bare PrivacyLedger.")
        if source.config.target_delta is None:
            raise ValueError("delta is required: the optimizer's config has no target_delta.")
        delta = source.config.target_delta
    points = epsilon_spent(ledger, delta, run_id=run_id)
    ax = _axes(ax)
    xs = [0] + [p.iteration for p in points]
    ys = [0.0] + [p.epsilon for p in points]
    ax.step(xs, ys, where="post", marker="o", label="ε spent")
    budget = ledger.validation_mu_budget
    if budget is not None and math.isfinite(budget):
        if ledger.validation.mechanisms():  # the RDP filter guarantees (α, α B²/2)-RDP at every grid order
            orders = PrivacyLedger.RDP_ORDERS
            limit = rdp_curve_epsilon([a * budget * budget / 2.0 for a in orders], orders, delta)[0]
        else:
            limit = gdp_epsilon(budget, delta)
        ax.axhline(limit, color="grey", linestyle="--", label="budget")
    if ledger.training.records():  # the other protected set: the training records (DP-SGD, AMP)
        training_delta = ledger.training_delta if ledger.training_delta is not None else delta
        eps = ledger.training.epsilon(training_delta)
        ax.axhline(eps, color="tab:orange", linestyle=":", label=f"training ε = {eps:.3g} (δ = {training_delta:.3g})")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"ε at δ = {delta:.3g}")
    ax.legend()
    return ax


def _proxy_losses(proxy: Callable[[Tensor], Tensor], points: Tensor) -> Tensor:
    values = torch.as_tensor(proxy(points))
    if values.ndim == 2:  # per-user losses of a proxy population: their mean
        values = values.double().mean(dim=-1)
    if values.ndim != 1 or values.shape[0] != points.shape[0]:
        raise ValueError(
            f"proxy must map a k x d tensor to k losses or a k x n matrix of losses, got shape "
            f"{tuple(values.shape)} for k = {points.shape[0]}."
        )
    return values.double()


def plot_loss(release: PrivateRelease, *, proxy: Callable[[Tensor], Tensor] | None = None, ax: Any = None) -> Any:
    r"""Loss against iterations: a public proxy's loss at the iterates, or the released
    noisy losses.

    Args:
        release: The run's ``PrivateRelease`` (``result().release``).
        proxy: A PUBLIC objective (e.g. the loss on public data, or the true loss of a
            synthetic benchmark) mapping ``k x d`` points to ``k`` losses or ``k x n``
            per-user losses (averaged). Never pass the sensitive objective: the plot would
            publish un-noised values.
        ax: A matplotlib ``Axes``; default a new figure.

    Returns:
        The ``Axes``.

    Raises:
        ValueError: Without ``proxy`` when the run released no losses (only
            ``selection="noisy_loss"`` releases noisy losses of the iterates).
    """
    its = torch.arange(release.iterates.shape[0])
    ax = _axes(ax)
    if proxy is not None:
        ax.plot(its.numpy(), _proxy_losses(proxy, release.iterates).numpy(), marker="o", label="public proxy loss")
    elif (scores := release.recorded("selection", "scores", None)) is not None:
        scores = scores.double()
        ax.plot(its[: scores.shape[0]].numpy(), scores.numpy(), marker="o", label="released noisy loss")
    else:
        raise ValueError(
            "This run released no losses: pass proxy= (a public objective), or run with "
            "selection='noisy_loss' to release noisy losses of the iterates."
        )
    if release.selected_index is not None:
        ax.axvline(release.selected_index, color="grey", linestyle=":", label="selected iterate")
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss")
    ax.legend()
    return ax


def plot_iterate_path(
    release: PrivateRelease, *, dims: tuple[int, int] = (0, 1), ax: Any = None, space: SearchSpace | None = None
) -> Any:
    r"""The iterates ``θ_0, …, θ_t`` and the evaluation points in two coordinates.

    Args:
        release: The run's ``PrivateRelease``.
        dims: The two coordinates to draw (distinct, each in ``[0, d)``).
        ax: A matplotlib ``Axes``; default a new figure.
        space: A ``tuning.SearchSpace``: the axes are then the hyperparameters by name, in
            natural units (log axes for log-scale ones); default ``θ[i]`` in search units.

    Returns:
        The ``Axes``.
    """
    d = release.iterates.shape[-1]
    if len(dims) != 2 or dims[0] == dims[1] or not all(isinstance(i, int) and 0 <= i < d for i in dims):
        raise ValueError(f"dims must be two distinct coordinates in [0, {d}), got {dims!r}.")
    i, j = dims
    if space is not None and space.dim != d:
        raise ValueError(f"space has dim {space.dim}, but the run's theta has d = {d}.")
    natural = (lambda X: X) if space is None else (lambda X: _natural(space, X))
    ax = _axes(ax)
    pts = natural(release.evaluation_points)
    if pts.shape[0]:
        ax.scatter(pts[:, i].numpy(), pts[:, j].numpy(), s=8, color="lightgrey", label="evaluations")
    path = natural(release.iterates)
    theta = natural(release.theta.reshape(1, -1))[0]
    ax.plot(path[:, i].numpy(), path[:, j].numpy(), marker="o", markersize=3, label="iterates")
    ax.scatter([float(path[0, i])], [float(path[0, j])], marker="s", color="black", zorder=3, label="θ₀")
    ax.scatter([float(theta[i])], [float(theta[j])], marker="*", s=120, color="red", zorder=3, label="released θ")
    if space is None:
        ax.set_xlabel(f"θ[{i}]")
        ax.set_ylabel(f"θ[{j}]")
    else:
        hp = space.relaxed
        ax.set_xlabel(hp[i].name)
        ax.set_ylabel(hp[j].name)
        ax.set_xscale("log" if hp[i].log_scale else "linear")
        ax.set_yscale("log" if hp[j].log_scale else "linear")
    ax.legend()
    return ax


def plot_run(
    optimizer: DPGIBO,
    *,
    proxy: Callable[[Tensor], Tensor] | None = None,
    delta: float | None = None,
    dims: tuple[int, int] = (0, 1),
    space: SearchSpace | None = None,
) -> Any:
    r"""One figure: ``ε`` spent (and the training records' ``ε`` when candidates were trained
    privately), loss (if a proxy is given or losses were released) and the iterate path (if
    ``d ≥ 2``; by hyperparameter name with ``space``) of a ``DPGIBO`` run.

    Args:
        optimizer: The ``DPGIBO`` (only its ledger and its private release are read).
        proxy: A PUBLIC objective for the loss panel (see ``plot_loss``).
        delta: ``δ`` for ``ε``; default ``config.target_delta``.
        dims: Coordinates of the path panel.
        space: The run's ``tuning.SearchSpace``, to name the path's axes and draw it in natural units.

    Returns:
        The matplotlib ``Figure``.
    """
    import matplotlib.pyplot as plt

    release = optimizer.result().release
    panels = ["privacy"]
    if proxy is not None or release.recorded("selection", "scores", None) is not None:
        panels.append("loss")
    if release.iterates.shape[-1] >= 2:
        panels.append("path")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.5), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel == "privacy":
            plot_privacy(optimizer, delta=delta, ax=ax)
        elif panel == "loss":
            plot_loss(release, proxy=proxy, ax=ax)
        else:
            plot_iterate_path(release, dims=dims, ax=ax, space=space)
    fig.tight_layout()
    return fig


def _natural(space: SearchSpace, points: Tensor) -> Tensor:
    r"""``k x d`` points in natural units, columns in the space's order (public post-processing)."""
    s = space.to_search_units(points.reshape(-1, points.shape[-1]))
    return torch.tensor(
        [[float(h.natural(v)) for h, v in zip(space.relaxed, row, strict=True)] for row in s.tolist()],
        dtype=torch.float64,
    )
