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
#: The row name of each ledger part of a DP-GIBO step (``events.release_key``) and of the selection, in
#: the order of a step's rows (a part not named here keeps its own name and comes after these).
PART_NAMES = {
    "norm": "gradient_norm",
    "clip": "clip_count",
    "grad": "gradient",
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


def _described(release: Any) -> tuple[dict[tuple[int | None, str], Any], dict[tuple[int | None, str], Any]]:
    r"""What ``release`` published, by ``(step, part)``: its gradients and what each strategy's record says
    it released (``released()``), in the order of ``PART_NAMES``; and the μ each record holds of its
    releases (``charged()``: ``None`` where the charge is not held in the release, e.g. a clip count's)."""
    values: dict[tuple[int | None, str], Any] = {(t, "grad"): g for t, g in enumerate(release.released_gradients)}
    mus: dict[tuple[int | None, str], Any] = {}
    for record in release.records.values():
        values.update(_described_by(record, "released"))
        mus.update(_described_by(record, "charged"))
    order = {part: rank for rank, part in enumerate(PART_NAMES)}
    return dict(sorted(values.items(), key=lambda item: order.get(item[0][1], len(order)))), mus


def _described_by(record: Any, name: str) -> dict[tuple[int | None, str], Any]:
    method = getattr(record, name, None)  # a user's record without it describes no release
    return dict(method()) if callable(method) else {}


def release_rows(
    release: Any, *, delta: float, charges: Charges | None = None, within: float | None = None
) -> list[dict[str, Any]]:
    r"""One row per quantity ``release`` published, in order (see the module): dicts with ``quantity``,
    ``step``, ``value``, ``mu`` and ``epsilon`` (at ``delta``). ``charges``: the run's ledger records
    (``charges_of``; ``None``: the ``μ`` the release holds, ``None`` for the rest). ``within``: the
    ``ε`` of a private selection whose winner this run is (every row then has it and ``mu = None``)."""
    described, mus = _described(release)
    unknown: set[tuple[int | None, str]] = set()
    if charges is None:  # the charges the release holds; a value after the steps is shown with its charge unknown
        charges = {key: [Gaussian(mu)] for key, mu in mus.items() if mu is not None}
        unknown = {key for key, mu in mus.items() if mu is None}
        values = described
    else:  # a value after the steps (a free rule's index is post-processing) is shown when the ledger charged it
        values = {key: value for key, value in described.items() if key[0] is not None or key in charges}
    keys = list(dict.fromkeys([*values, *charges]))  # released values first, then charges with no value (a fit)
    rows: list[dict[str, Any]] = []
    before: list[Any] = []  # the events an iterate depends on
    complete = True  # every charge before it is known
    steps = release.iterates.shape[0]
    for step in [*range(steps), None]:  # each step's iterate and releases, then those after the steps
        if step is not None:
            rows.append(_row("iterate", step, _plain(release.iterates[step]), None, _epsilon(before, complete, delta)))
        for key in (k for k in keys if k[0] == step or (step is None and k[0] is not None and k[0] >= steps)):
            known = key not in unknown and key in charges
            mu, epsilon = cost(charges[key], delta) if known else (None, None)
            value = values.get(key)
            rows.append(
                _row(
                    PART_NAMES.get(key[1], key[1]),
                    key[0],
                    _plain(value) if key[0] is not None else _listed(value),
                    mu,
                    epsilon,
                )
            )
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


def _listed(value: Any) -> Any:
    r"""A tensor as a (nested) list of floats; anything else as it is (a chosen index stays an ``int``)."""
    return value.tolist() if hasattr(value, "tolist") else value


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
