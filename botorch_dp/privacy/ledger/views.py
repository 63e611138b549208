r"""What a ledger has recorded, read back, per side: ``ledger.validation`` (``ValidationReads``)
and ``ledger.training`` (``TrainingReads``), and the report of both (``ledger_report``).

Each read of a stored ledger reloads the dataset's rows first (``synced``), so it sees what
every process sharing the database has recorded; a read made of several reads sees one snapshot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from botorch_dp.privacy.analysis.gdp import compose_gdp
from botorch_dp.privacy.checks import check_delta
from botorch_dp.privacy.ledger.accounts import LedgerAccounts
from botorch_dp.privacy.ledger.events import (
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PureDP,
    Record,
    TrainingEvent,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationEvent,
    ValidationMechanism,
    training_event,
    validation_parts,
)
from botorch_dp.privacy.ledger.filters import (
    accountant_for,
    event_rdp,
    gdp_only,
    rdp_grid_epsilon,
    remaining_validation_mu,
    training_epsilon_of,
    training_rdp_curve,
    validation_composition,
    validation_epsilon_of,
    validation_rdp_curve,
)
from botorch_dp.privacy.ledger.meter import check_validation_bound

__all__ = ["TrainingReads", "ValidationReads", "ledger_report", "read_records", "synced"]

_F = TypeVar("_F", bound=Callable[..., Any])


def synced(method: _F) -> _F:
    r"""A read of a part holding ``self._accounts``: one snapshot of the rows for the whole call
    (``LedgerAccounts.reading``)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._accounts.reading():
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def read_records(accounts: LedgerAccounts, side: str | None = None, run_id: Any = None) -> list[Record]:
    r"""The records of ``accounts`` (of ``side``: ``"validation"``, ``"training"`` or None for both;
    of ``run_id``: None for all runs), in recording order."""
    with accounts.reading() as rows:
        return [
            row.record()
            for row in rows
            if row.recorded and side in (None, row.side) and (run_id is None or row.run_id == run_id)
        ]


class ValidationReads:
    r"""The validation side of a ledger, read back (``ledger.validation``): records, per-key
    charges, and the composed μ, RDP curve and ε, over all runs or one.

    Args:
        accounts: The ledger's state.
    """

    def __init__(self, accounts: LedgerAccounts) -> None:
        self._accounts = accounts

    def records(self, run_id: str | None = None) -> list[Record]:
        r"""The validation records, in recording order (``run_id``: only that run's)."""
        return read_records(self._accounts, "validation", run_id)

    def _parts(self, run_id: str | None = None) -> list[tuple[str, str, ValidationEvent]]:
        r"""``(run_id, key, event)`` of each validation record, in order (``validation_parts``)."""
        return [validation_parts(r) for r in self.records(run_id)]

    def _events(self, run_id: str | None = None) -> list[ValidationEvent]:
        return [event for _, _, event in self._parts(run_id)]

    def run_ids(self) -> list[str]:
        r"""The run ids with at least one validation release, in order of first recording."""
        return list(dict.fromkeys(run_id for run_id, _, _ in self._parts()))

    def steps(self) -> dict[tuple[str, str], float]:
        r"""The Gaussian and pure ε-DP charges, {(run_id, key): μ}, in order of first recording; a
        key recorded more than once (a step replayed with fresh noise) shows the composition of
        its records, √Σμ². RDP entries are in ``mechanisms``, ``(ε, δ)`` entries in ``approximate``."""
        squares: dict[tuple[str, str], list[float]] = {}
        for run_id, key, event in self._parts():
            if isinstance(event, (Gaussian, PureDP)):
                squares.setdefault((run_id, key), []).append(event.mu)
        return {key: compose_gdp(mus) for key, mus in squares.items()}

    def mechanisms(self) -> dict[tuple[str, str], ValidationMechanism]:
        r"""The releases given by an RDP curve, {(run_id, key): ValidationMechanism} (a key
        recorded twice shows its last record; ``records`` has every one)."""
        return {(run_id, key): event for run_id, key, event in self._parts() if isinstance(event, ValidationMechanism)}

    def approximate(self) -> dict[tuple[str, str], ValidationApproximateDP]:
        r"""The releases known by an ``(ε, δ)`` statement, {(run_id, key): ValidationApproximateDP}."""
        return {
            (run_id, key): event for run_id, key, event in self._parts() if isinstance(event, ValidationApproximateDP)
        }

    def release_curves(self) -> list[tuple[str, str, tuple[float, ...]]]:
        r"""``(run_id, key, curve)`` of every validation record, in order: its RDP curve on
        ``RDP_ORDERS`` (the terms ``rdp_curve`` sums)."""
        return [(run_id, key, tuple(float(v) for v in event_rdp(event))) for run_id, key, event in self._parts()]

    def mu(self, run_id: str | None = None) -> float:
        r"""Total GDP parameter of the validation data, √Σ_j μ_j² over every record.

        Args:
            run_id: Only that run's releases (what it spent on its own); default all runs,
                which is what the validation users paid.

        Returns:
            μ ≥ 0 (0.0 with no releases, ``inf`` after a non-private one). ``ValueError`` when
            the releases asked about include an RDP or an ``(ε, δ)`` entry: no μ covers it (use
            ``epsilon``).
        """
        events = self._events(run_id)
        if not gdp_only(events):
            which = "the validation side" if run_id is None else f"run {run_id!r}"
            example = next(e for e in events if not isinstance(e, (Gaussian, PureDP)))
            kind = "a Renyi-DP curve"
            if isinstance(example, ValidationApproximateDP):
                kind = "an (epsilon, delta) statement"
            raise ValueError(
                f"{which} holds releases given by {kind} (e.g. {example.description!r}), which no "
                "GDP mu covers: use ledger.validation.epsilon(delta)."
            )
        return compose_gdp(e.mu for e in events)

    def rdp_curve(self, run_id: str | None = None) -> tuple[float, ...]:
        r"""The composed RDP curve of the validation releases on ``RDP_ORDERS`` (zeros with none; ``inf``
        at every order once an ``(ε, δ)`` entry is among them: no Rényi bound covers it)."""
        return tuple(float(v) for v in validation_rdp_curve(self._events(run_id)))

    def epsilon(self, delta: float) -> float:
        r"""ε at ``delta`` of the validation data, all runs: the exact GDP conversion while the
        side is GDP only, the RDP conversion of ``rdp_curve`` otherwise; ``(ε_i, δ_i)`` entries by
        basic composition (``filters.validation_epsilon_of``: ``inf`` when ``delta < Σ δ_i``)."""
        return validation_epsilon_of(self._events(), check_delta(delta))

    @synced
    def remaining_mu(self) -> float:
        r"""The μ of the largest further Gaussian release the budget allows, counting every record
        and reservation of all runs (``inf`` without a budget)."""
        return remaining_validation_mu(
            self._accounts.validation_budget(), self._accounts.spent("validation"), self._accounts.validation_delta
        )

    @synced
    def check_admits(self, bound: Mapping[str, Any], what: str = "the next release") -> None:
        r"""Raise ``PrivacyBudgetExceeded`` if ``ledger.charge(bound)`` would be refused now, holding
        and recording nothing: a caller can refuse before paying for what a release needs
        (``DPGIBO.ask`` checks the next step before its batch is evaluated). ``charge`` checks
        again, since other runs may spend in between."""
        events = list(check_validation_bound(bound).values())
        self._accounts.check_validation(events, what)


class TrainingReads:
    r"""The training side of a ledger, read back (``ledger.training``): records, entries by kind,
    the composed RDP curve and ε, and the accountant that ε uses.

    Args:
        accounts: The ledger's state.
    """

    def __init__(self, accounts: LedgerAccounts) -> None:
        self._accounts = accounts

    def records(self) -> list[Record]:
        r"""The training records, in recording order."""
        return read_records(self._accounts, "training")

    def _events(self) -> list[TrainingEvent]:
        return [training_event(r.event) for r in self.records()]

    def run_ids(self) -> list[Any]:
        r"""The ids of all training entries, in recording order."""
        return [r.run_id for r in self.records()]

    def runs(self) -> dict[Any, DPSGDRun]:
        r"""The recorded DP-SGD training runs, {run_id: (σ, q, steps)}."""
        return {r.run_id: r.event for r in self.records() if isinstance(r.event, DPSGDRun)}

    def mechanisms(self) -> dict[Any, TrainingMechanism]:
        r"""The training entries given by an RDP curve, {run_id: TrainingMechanism}."""
        return {r.run_id: r.event for r in self.records() if isinstance(r.event, TrainingMechanism)}

    def approximate(self) -> dict[Any, ApproximateDP]:
        r"""The training entries known by an ``(ε, δ)`` statement, {run_id: ApproximateDP}."""
        return {r.run_id: r.event for r in self.records() if isinstance(r.event, ApproximateDP)}

    def history(self) -> list[DPSGDRun]:
        r"""The DP-SGD runs as an Opacus accountant history ``(σ, q, steps)``, in recording order."""
        return [event for event in self._events() if isinstance(event, DPSGDRun)]

    def rdp_curve(self) -> tuple[float, ...]:
        r"""The composed RDP curve on ``TRAINING_RDP_ORDERS`` of all training entries but the
        ``ApproximateDP`` ones (which have none; ``epsilon`` adds them)."""
        return tuple(float(v) for v in training_rdp_curve(self._events()))

    def accountant_in_use(self, accountant: str | None = None) -> tuple[str, str]:
        r"""Which accountant ``epsilon`` uses, and why (``accountant``: ``"rdp"``, ``"prv"`` or None
        for the ledger's, falling back to RDP for non-DP-SGD entries)."""
        return accountant_for(self._events(), self._accounts.training_accountant, accountant)

    def epsilon(self, delta: float, accountant: str | None = None) -> float:
        r"""ε at ``delta`` of all training entries composed (0.0 with none; see ``accountant_in_use``)."""
        delta = check_delta(delta)
        entries = self._events()
        name, _ = accountant_for(entries, self._accounts.training_accountant, accountant)
        return training_epsilon_of(entries, delta, name, self._accounts.prv_eps_error)[0]


def ledger_report(accounts: LedgerAccounts, delta: float, *, training_delta: float | None = None) -> dict[str, Any]:
    r"""Both guarantees of the ledger whose state is ``accounts``, side by side but never composed
    (different datasets): ``PrivacyLedger.report``.

    Args:
        accounts: The ledger's state.
        delta: δ for the validation guarantee.
        training_delta: δ for the training guarantee (default: the ledger's, then ``delta``).

    Returns:
        ``{"validation": {...}, "training": {...}}`` with plain values: validation ``mu``
        (None with an RDP or an ``(ε, δ)`` entry), ``epsilon``, ``delta``, ``num_steps`` (records
        of every kind, all runs), ``num_runs``, ``mu_budget``, ``remaining_mu``, ``pure_releases``
        (``{"run_id", "key", "epsilon", "mu"}`` each), ``approximate_dp`` (``{"run_id", "key",
        "description", "epsilon", "delta"}`` of each ``(ε, δ)`` entry, composed by basic
        composition), with such entries ``composition`` (``rule`` in words and the parts of
        ``filters.validation_composition``: ``Σ ε_i``, ``Σ δ_i``, the δ left for the other releases and
        their ε), with a ``validation_delta`` ``budget_delta``, and, with RDP or ``(ε, δ)`` entries,
        ``rdp_order`` (None when an ``(ε, δ)`` entry leaves no RDP conversion) and ``rdp_releases``
        (``{"run_id", "key", "description"}`` each); training
        ``accountant``, ``accountant_reason``, ``epsilon``, ``delta``, ``rdp_order``,
        ``num_runs``, ``num_dp_sgd_runs``, ``num_mechanisms`` (RDP curves and ``(ε, δ)``
        entries), ``epsilon_budget`` and ``approximate_dp`` (``{"run_id", "description",
        "epsilon", "delta"}`` of each ``ApproximateDP`` entry, composed by basic composition).
    """
    delta = check_delta(delta)
    if training_delta is None:
        training_delta = accounts.training_delta if accounts.training_delta is not None else delta
    training_delta = check_delta(training_delta, "training_delta")
    validation_reads = ValidationReads(accounts)
    with accounts.reading():  # one snapshot of the rows for the whole report
        validation_records = [validation_parts(r) for r in validation_reads.records()]
        training_records = read_records(accounts, "training")
        remaining_mu = validation_reads.remaining_mu()
        validation_epsilon = validation_reads.epsilon(delta)
    events = [event for _, _, event in validation_records]
    entries = [training_event(r.event) for r in training_records]
    accountant, reason = accountant_for(entries, accounts.training_accountant, None)
    epsilon, order = training_epsilon_of(entries, training_delta, accountant, accounts.prv_eps_error)
    num_mechanisms = sum(isinstance(e, (TrainingMechanism, ApproximateDP)) for e in entries)
    validation: dict[str, Any] = {
        "mu": compose_gdp(e.mu for e in events) if gdp_only(events) else None,
        "epsilon": validation_epsilon,
        "delta": delta,
        "num_steps": len(validation_records),
        "num_runs": len(dict.fromkeys(run_id for run_id, _, _ in validation_records)),
        "mu_budget": accounts.validation_mu_budget,
        "remaining_mu": remaining_mu,
        "pure_releases": [
            {"run_id": run_id, "key": key, "epsilon": event.epsilon, "mu": event.mu}
            for run_id, key, event in validation_records
            if isinstance(event, PureDP)
        ],
        "approximate_dp": [
            {"run_id": run_id, "key": key, "description": e.description, "epsilon": e.epsilon, "delta": e.delta}
            for run_id, key, e in validation_records
            if isinstance(e, ValidationApproximateDP)
        ],
    }
    if accounts.validation_delta is not None:
        validation["budget_delta"] = accounts.validation_delta
    if validation["approximate_dp"]:
        validation["composition"] = {
            "rule": (
                "basic composition: the (epsilon, delta) entries' epsilons and deltas added, the other releases "
                "converted at the delta they leave"
            ),
            **validation_composition(events, delta),
        }
    if not gdp_only(events):
        validation["rdp_order"] = rdp_grid_epsilon(validation_rdp_curve(events), delta)[1]
        validation["rdp_releases"] = [
            {"run_id": run_id, "key": key, "description": event.description}
            for run_id, key, event in validation_records
            if isinstance(event, ValidationMechanism)
        ]
    return {
        "validation": validation,
        "training": {
            "accountant": accountant,
            "accountant_reason": reason,
            "epsilon": epsilon,
            "delta": training_delta,
            "rdp_order": order,
            "num_runs": len(entries),
            "num_dp_sgd_runs": len(entries) - num_mechanisms,
            "num_mechanisms": num_mechanisms,
            "epsilon_budget": accounts.training_epsilon_budget,
            "approximate_dp": [
                {
                    "run_id": r.run_id,
                    "description": r.event.description,
                    "epsilon": r.event.epsilon,
                    "delta": r.event.delta,
                }
                for r in training_records
                if isinstance(r.event, ApproximateDP)
            ],
        },
    }
