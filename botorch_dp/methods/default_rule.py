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

from dataclasses import dataclass

__all__ = ["DefaultMethod", "default_method"]


@dataclass(frozen=True)
class DefaultMethod:
    r"""The rule's pick.

    Attributes:
        method: ``"dp_gibo"`` or ``"private_random_search"`` (``tune``'s ``method`` names).
        reason: One line: which rule picked it and why.
    """

    method: str
    reason: str


def default_method(
    *, num_continuous: int, num_integer: int = 0, num_categorical: int = 0, resumable: bool = False
) -> DefaultMethod:
    r"""The method ``tune(method="auto")`` runs without a proxy, from public facts only (see the module).

    Args:
        num_continuous: The number of continuous hyperparameters (``Hyperparameter``).
        num_integer: The number of ``Integer`` hyperparameters.
        num_categorical: The number of ``Categorical`` hyperparameters not fixed.
        resumable: Whether the call must resume from a checkpoint (only DP-GIBO's runs do).

    Returns:
        The ``DefaultMethod`` (the method and its one-line reason).

    Raises:
        ValueError: Naming the count that is not an integer ``≥ 0``, or when there is no
            continuous or integer hyperparameter.
    """
    counts = {"num_continuous": num_continuous, "num_integer": num_integer, "num_categorical": num_categorical}
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}.")
    if num_continuous + num_integer == 0:
        raise ValueError("num_continuous + num_integer must be at least 1 (a space has a coordinate to search).")
    head = "default rule without a proxy (reports/default_rule.md)"
    if resumable:
        return DefaultMethod("dp_gibo", f"{head}: DP-GIBO, since checkpoint_dir= asks for resumable runs")
    kinds = [f"{n} {kind}" for n, kind in ((num_integer, "integer"), (num_categorical, "categorical")) if n]
    if kinds:
        return DefaultMethod(
            "private_random_search",
            f"{head}: private random search, since the space has {' and '.join(kinds)} hyperparameter(s)",
        )
    return DefaultMethod(
        "dp_gibo", f"{head}: DP-GIBO, since all {num_continuous} hyperparameter(s) of the space are continuous"
    )
