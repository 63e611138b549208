r"""A released-values table (like Optuna's ``trials_dataframe()``): one row per released quantity.

``release_rows`` lists what a DP-GIBO run released, in order, one row each: the iterates
``θ_t`` (post-processing of the steps before them; ``θ_0`` is the public start), each step's
noisy gradient, noisy norm, noisy clip count and preconditioner, a private selection's noisy
scores or chosen index, and the returned ``θ``. Every value is read from the ``PrivateRelease``
(nothing un-noised: the NON-PRIVATE diagnostics are never read). Each row carries

``mu`` (the Gaussian-DP ``μ`` charged for this release's own noise; ``None`` for a value computed
from other releases, one known only by its RDP curve, and inside a private selection) and
``epsilon`` (at ``delta``, of everything the value depends on; ``None`` when a charge is not known).

The evaluation points and posterior traces are functions of the iterates (``to_json`` has them).
``as_table`` gives the rows as a pandas ``DataFrame`` when pandas is installed (it is optional).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.ledger import Gaussian, PureDP, Record, parse_release_key
from botorch_dp.privacy.ledger.filters import event_rdp, rdp_grid_epsilon

__all__ = ["COLUMNS", "Charges", "as_table", "charges_of", "cost", "finish", "protected", "release_rows"]

#: The columns of a run's rows (``TuneResult.released_values`` adds ``run`` and ``configuration``).
COLUMNS = ("quantity", "step", "value", "mu", "epsilon", "delta", "protected")
#: The row name of each ledger part of a DP-GIBO step (``events.release_key``) and of the selection.
PART_NAMES = {
    "grad": "gradient",
    "norm": "gradient_norm",
    "clip": "clip_count",
    "precond": "preconditioner",
    "fit": "NON_PRIVATE_fit",
    "select": "selection",
}
#: ``{(step, part): [events]}``: what the ledger recorded for each release of one run.
Charges = dict[tuple[int | None, str], list[Any]]


def charges_of(records: Iterable[Record]) -> Charges:
    r"""The validation ``records`` of one run, by ``(step, part)`` (``parse_release_key``); a release
    recorded twice (a replayed step) keeps both records."""
    out: Charges = {}
    for record in records:
        out.setdefault(parse_release_key(record.key), []).append(record.event)
    return out


def cost(events: Sequence[Any], delta: float) -> tuple[float | None, float]:
    r"""``(μ, ε)`` at ``delta`` of ``events`` composed: the exact GDP conversion while all are Gaussian
    or pure ``ε``-DP (pure ones alone: the smaller of that and their summed ``ε``), else ``(None, ε)``
    of the summed Rényi-DP curve; ``(0.0, 0.0)`` for none."""
    if all(isinstance(e, (Gaussian, PureDP)) for e in events):
        mu = compose_gdp(e.mu for e in events)
        if events and all(isinstance(e, PureDP) for e in events):  # pure ε-DP: ε adds, tighter than its μ alone
            return mu, min(math.fsum(e.epsilon for e in events), gdp_epsilon(mu, delta))
        return mu, gdp_epsilon(mu, delta)
    curve = np.sum([event_rdp(e) for e in events], axis=0)
    return None, rdp_grid_epsilon(curve, delta)[0]


def _from_release(release: Any) -> tuple[Charges, set[str]]:
    r"""The charges a release states itself (gradients, norms, preconditioners) and the parts whose
    charge it does not hold (clip counts; a selection's, which it cannot tell from a free one)."""
    charges: Charges = {}
    for part, mus in (
        ("grad", release.recorded("noise", "step_mus")),
        ("norm", release.recorded("noise", "norm_mus")),
        ("precond", release.recorded("step_rule", "mus")),
    ):
        for step, mu in enumerate(mus):
            charges[(step, part)] = [Gaussian(mu)]
    unknown = {"clip"} if release.recorded("clip", "counts") else set()
    scores = release.recorded("selection", "scores", None)
    if release.selected_index is not None or scores is not None:
        unknown.add("select")
    return charges, unknown


def release_rows(
    release: Any, *, delta: float, charges: Charges | None = None, within: float | None = None
) -> list[dict[str, Any]]:
    r"""One row per quantity ``release`` published, in order (see the module): dicts with ``quantity``,
    ``step``, ``value``, ``mu`` and ``epsilon`` (at ``delta``). ``charges``: the run's ledger records
    (``charges_of``; ``None``: the ``μ`` the release holds, ``None`` for the rest). ``within``: the
    ``ε`` of a private selection whose winner this run is (every row then has it and ``mu = None``)."""
    unknown: set[str] = set()
    if charges is None:
        charges, unknown = _from_release(release)
    values: dict[tuple[int | None, str], Any] = {}
    for part, series in (
        ("norm", release.recorded("noise", "noisy_norms")),
        ("clip", release.recorded("clip", "counts")),
        ("grad", release.released_gradients),
        ("precond", release.recorded("step_rule", "preconditioners")),
    ):
        for step, value in enumerate(series):
            values[(step, part)] = _plain(value)
    if (scores := release.recorded("selection", "scores", None)) is not None:
        values[(None, "select")] = _plain(scores)
    elif (None, "select") in charges or "select" in unknown:
        values[(None, "select")] = release.selected_index
    keys = list(dict.fromkeys([*values, *charges]))  # released values first, then charges with no value (a fit)
    rows: list[dict[str, Any]] = []
    before: list[Any] = []  # the events an iterate depends on
    complete = True  # every charge before it is known
    steps = release.iterates.shape[0]
    for step in [*range(steps), None]:  # each step's iterate and releases, then those after the steps
        if step is not None:
            rows.append(_row("iterate", step, _plain(release.iterates[step]), None, _epsilon(before, complete, delta)))
        for key in (k for k in keys if k[0] == step or (step is None and k[0] is not None and k[0] >= steps)):
            known = key[1] not in unknown and key in charges
            mu, epsilon = cost(charges[key], delta) if known else (None, None)
            rows.append(_row(PART_NAMES.get(key[1], key[1]), key[0], values.get(key), mu, epsilon))
            before += charges.get(key, [])
            complete = complete and known
    rows.append(_row("theta", None, _plain(release.theta), None, _epsilon(before, complete, delta)))
    if within is not None:
        for row in rows:
            row["mu"], row["epsilon"] = None, within
    return rows


def _epsilon(events: list[Any], complete: bool, delta: float) -> float | None:
    return cost(events, delta)[1] if complete else None


def _row(quantity: str, step: int | None, value: Any, mu: float | None, epsilon: float | None) -> dict[str, Any]:
    return {"quantity": quantity, "step": step, "value": value, "mu": mu, "epsilon": epsilon}


def _plain(value: Any) -> Any:
    r"""A tensor as a float or a (nested) list of floats; a number as a float."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def as_table(rows: list[dict[str, Any]], as_frame: bool | None) -> Any:
    r"""``rows`` as a pandas ``DataFrame`` (``as_frame=None``: when pandas is installed; ``True``:
    ``ImportError`` without it), else the list of dicts itself (``as_frame=False``)."""
    if as_frame is False:
        return rows
    try:
        pandas: Any = importlib.import_module("pandas")  # optional: not a dependency, and untyped here
    except ImportError as error:
        if as_frame:
            raise ImportError("as_frame=True needs pandas (pip install pandas); it is optional.") from error
        return rows
    frame = pandas.DataFrame(rows, columns=list(dict.fromkeys(k for row in rows for k in row)) or None)
    for column in ("run", "step"):  # integers with gaps (None), not floats
        if column in frame:
            frame[column] = frame[column].astype("Int64")
    return frame


def protected(statement: Any, epsilon: float | None) -> str:
    r"""The protected sets whose guarantee covers a row of ``epsilon`` (``statement``: the ledger's
    ``GuaranteeStatement``, or None): the validation users unless the row's ``ε`` is infinite, and
    the training records when the ledger holds a DP training guarantee (every loss, hence every
    released value, comes from the models it trained); ``"nothing"`` when neither holds."""
    sets = [] if epsilon is not None and math.isinf(epsilon) else ["validation users"]
    training = None if statement is None else statement.training
    if training is not None and training.holds:
        sets.append("training records")
    return " and ".join(sets) or "nothing"


def finish(rows: list[dict[str, Any]], delta: float, statement: Any) -> list[dict[str, Any]]:
    r"""``rows`` with ``delta`` and ``protected`` (``protected``) set, in ``COLUMNS`` order after
    any leading columns a caller put first."""
    for row in rows:
        row["delta"] = delta
        row["protected"] = protected(statement, row["epsilon"])
    return rows
