r"""The public rule that picks ``tune``'s method when no proxy can compare the methods (issue 41).

Without a public proxy nothing can be simulated, so ``method="auto"`` follows a rule measured on
the benchmarks (``reports/default_rule.md`` gathers the numbers). It reads only public facts of
the call, never the objective: the kinds of hyperparameters, their number, and whether the call
must be resumable.

* any ``Integer`` or ``Categorical`` hyperparameter: **private random search** (over the space's
  public encoding on a mixed space). On the mixed digits benchmark (``reports/mixed.md``, ε = 3)
  it beat ``tune``'s DP-GIBO on 8 of 10 paired seeds (test loss 0.1200 ± 0.0081 against
  0.1364 ± 0.0092; DP-HyPO 0.1236 ± 0.0098), and on the issue's held-out mixed task DP-GIBO
  beat it on only 2 of 10. Rounding makes the loss piecewise constant along an integer's
  coordinate, which DP-GIBO's local gradient steps read poorly;
* only continuous hyperparameters, any ``d``: **DP-GIBO**. Through ``tune`` with its defaults it
  beat private random search on 8-10 of 10 paired seeds at every d from 1 to 5 on the GP
  length-scale task, and was level at d = 1, 2 and ahead at d = 3 (8/10) on the digits MLP,
  with the lower mean in every cell (``reports/default_rule.md``); the dimension benchmark
  adds d = 2 to 100 (``reports/dimension.md``) and the issue's held-out tasks 29 of 30 seeds at
  d = 5, 10, 20. Private random search degrades with ``d``;
* a resumable call (``checkpoint_dir``): DP-GIBO whatever the space, the only method whose runs resume.

The budget, the number of users and ``ε`` do not enter: the measurements above do not
separate them. The rule's failure modes are in the how-to (``docs/how-to/tune-torch-model.md``,
"Which method when").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "DefaultMethod", "default_method", "picked_method", "space_kinds"]


@dataclass(frozen=True)
class DefaultMethod:
    r"""The rule's pick.

    Attributes:
        method: ``"dp_gibo"`` or ``"private_random_search"`` (``tune``'s ``method`` names).
        reason: One line: which rule picked it and why.
    """

    method: str
    reason: str


#: The kinds of hyperparameters the rule reads (``SearchSpace.describe()``'s ``"kind"``).
KINDS = ("continuous", "integer", "categorical")


def space_kinds(space: Any) -> list[str]:
    r"""The kind of each hyperparameter of ``space`` still to tune (``SearchSpace.describe``; a categorical
    fixed by ``with_choice`` left out): the public facts ``default_method`` reads."""
    return [h["kind"] for h in space.describe() if h["name"] not in space.fixed]


def default_method(kinds: Sequence[str], *, resumable: bool = False) -> DefaultMethod:
    r"""The method ``tune(method="auto")`` runs without a proxy, from public facts only (see the module).

    Args:
        kinds: The kind of each hyperparameter still to tune (``"continuous"``, ``"integer"`` or
            ``"categorical"``; a categorical fixed by ``with_choice`` left out).
        resumable: Whether the call must resume from a checkpoint (only DP-GIBO's runs do).

    Returns:
        The ``DefaultMethod`` (the method and its one-line reason).

    Raises:
        ValueError: Naming ``kinds`` when one is unknown, or when none is continuous or integer.
    """
    kinds = list(kinds)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"kinds must hold only {KINDS}, got {unknown[0]!r}.")
    counts = {kind: kinds.count(kind) for kind in KINDS}
    if counts["continuous"] + counts["integer"] == 0:
        raise ValueError(f"kinds must hold a continuous or integer hyperparameter (a coordinate), got {kinds}.")
    head = "default rule without a proxy (reports/default_rule.md)"
    if resumable:
        return DefaultMethod("dp_gibo", f"{head}: DP-GIBO, since checkpoint_dir= asks for resumable runs")
    discrete = [f"{counts[k]} {k}" for k in ("integer", "categorical") if counts[k]]
    if discrete:
        return DefaultMethod(
            "private_random_search",
            f"{head}: private random search, since the space has {' and '.join(discrete)} hyperparameter(s)",
        )
    return DefaultMethod(
        "dp_gibo", f"{head}: DP-GIBO, since all {counts['continuous']} hyperparameter(s) of the space are continuous"
    )


def picked_method(
    given: str,
    resolved: str,
    kinds: Sequence[str],
    *,
    proxy: bool,
    trains: bool,
    protect: str,
    resumable: bool,
    trained_with: str | None = None,
) -> tuple[str, str]:
    r"""The method ``tune`` runs and the one line saying which rule picked it.

    Args:
        given: ``tune``'s ``method`` as passed.
        resolved: As ``tune``'s argument checks left it (``"auto"`` where a comparison on the proxy
            or this rule decides; ``"dp_gibo"`` where a DP-trained objective or ``strategy="sample"``
            rules a selection out; ``"training_selection"`` for the training records without a proxy).
        kinds: The hyperparameters' kinds (``default_method``).
        proxy: Whether a public proxy was given.
        trains: Whether the objective charges DP training runs.
        protect: ``tune``'s resolved ``protect``.
        resumable: Whether ``checkpoint_dir`` was given.
        trained_with: What the objective trains a run with, in words (``selection_charge.training_mechanism``;
            ``None``: "DP"), named by the rule of a selection over whole training runs.

    Returns:
        ``(method, reason)``: ``"auto"`` stays ``"auto"`` with a proxy (the comparison there decides).
    """
    if given != "auto":
        return resolved, f"method={given!r} given"
    if protect != "validation":
        if resolved == "training_selection":
            return (
                resolved,
                f"protect={protect!r} without a proxy: private selection over whole {trained_with or 'DP'} training "
                "runs",
            )
        return resolved, (
            f"method='auto' with a proxy and protect={protect!r}: the training method the comparison on the proxy "
            "recommends"
        )
    if resolved == "auto" and not proxy:
        rule = default_method(kinds, resumable=resumable)
        return rule.method, rule.reason
    if resolved == "auto":
        return resolved, (
            "method='auto' with a proxy: the method the comparison on the proxy recommends (DP-GIBO where "
            "plan_budget or plan_options leave no comparison)"
        )
    why = (
        "an objective that charges DP training runs (the training ledger would count a selection's hidden trials)"
        if trains
        else "strategy='sample' (Papernot–Steinke over DP-GIBO runs on sampled configurations)"
    )
    return resolved, f"method='auto' with {why}: DP-GIBO"
