r"""What a ledger has recorded, read back: per side, per run, composed, converted, reported.

Every reader of a stored ledger reloads the dataset's rows first (``synced``), so it sees
what every process sharing the database has recorded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.checks import check_delta
from botorch_dp.privacy.ledger.accounts import LedgerAccounts
from botorch_dp.privacy.ledger.events import (
    ApproximateDP,
    DPSGDRun,
    PureDP,
    Record,
    TrainingEvent,
    TrainingMechanism,
    ValidationEvent,
    ValidationMechanism,
    training_event,
    validation_parts,
)
from botorch_dp.privacy.ledger.filters import (
    accountant_for,
    check_validation_admits,
    event_rdp,
    gdp_only,
    rdp_grid_epsilon,
    remaining_validation_mu,
    training_epsilon_of,
    training_rdp_curve,
    validation_rdp_curve,
)
from botorch_dp.privacy.ledger.meter import check_validation_bound
from botorch_dp.privacy.ledger.rows import rows_from_storage

__all__ = ["LedgerViews", "synced"]

_F = TypeVar("_F", bound=Callable[..., Any])


def synced(method: _F) -> _F:
    r"""A reader of a stored ledger: reloads the dataset's rows first (one consistent snapshot
    per outermost call; in memory it only takes the lock)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._storage is None or self._holding:
                return method(self, *args, **kwargs)
            self._holding = True
            try:
                self._rows = rows_from_storage(self._storage.rows(self.dataset))
                return method(self, *args, **kwargs)
            finally:
                self._holding = False

    return wrapper  # type: ignore[return-value]


def _epsilon_of_pure(events: list[PureDP]) -> float:
    return math.fsum(e.epsilon for e in events)


class LedgerViews(LedgerAccounts):
    r"""The read side of ``PrivacyLedger`` (it reads the rows ``LedgerAccounts`` keeps)."""

    # ---------------------------------------------------------------- records
    @synced
    def records(self, side: str | None = None, run_id: Any = None) -> list[Record]:
        r"""The records (releases made), in recording order.

        Args:
            side: ``"validation"``, ``"training"`` or None (both).
            run_id: Only this run's records (None: all runs).
        """
        return [
            row.record()
            for row in self._rows
            if row.recorded and side in (None, row.side) and (run_id is None or row.run_id == run_id)
        ]

    def validation_records(self, run_id: str | None = None) -> list[Record]:
        r"""The validation records, in recording order (``run_id``: only that run's)."""
        return self.records("validation", run_id)

    def training_records(self) -> list[Record]:
        r"""The training records, in recording order."""
        return self.records("training")

    def _validation_parts(self, run_id: str | None = None) -> list[tuple[str, str, ValidationEvent]]:
        r"""``(run_id, key, event)`` of each validation record, in order (``validation_parts``)."""
        return [validation_parts(r) for r in self.validation_records(run_id)]

    def _validation_events(self, run_id: str | None = None) -> list[ValidationEvent]:
        return [event for _, _, event in self._validation_parts(run_id)]

    def _training_events(self) -> list[TrainingEvent]:
        return [training_event(r.event) for r in self.training_records()]

    @synced
    def num_reservations(self) -> int:
        r"""How many reservations are held (open charges, or ones left by a process that died
        inside a charge: ``cancel_reservations``)."""
        return sum(not row.recorded for row in self._rows)

    @synced
    def has_run(self, run_id: Any) -> bool:
        r"""Whether ``run_id`` has a record, on either side."""
        return any(row.recorded and row.run_id == run_id for row in self._rows)

    # ------------------------------------------------------------- validation
    @property
    def validation_steps(self) -> dict[tuple[str, str], float]:
        r"""The Gaussian and pure ε-DP validation charges, {(run_id, key): μ}, in order of first
        recording; a key recorded more than once (a step replayed with fresh noise) shows the
        composition of its records, √Σμ². RDP entries are in ``validation_mechanisms``."""
        squares: dict[tuple[str, str], list[float]] = {}
        for run_id, key, event in self._validation_parts():
            if not isinstance(event, ValidationMechanism):
                squares.setdefault((run_id, key), []).append(event.mu)
        return {key: compose_gdp(mus) for key, mus in squares.items()}

    @property
    def validation_mechanisms(self) -> dict[tuple[str, str], ValidationMechanism]:
        r"""The validation releases given by an RDP curve, {(run_id, key): ValidationMechanism}
        (a key recorded twice shows its last record; ``validation_records`` has every one)."""
        return {
            (run_id, key): event
            for run_id, key, event in self._validation_parts()
            if isinstance(event, ValidationMechanism)
        }

    @property
    def validation_pure_epsilons(self) -> dict[tuple[str, str], float]:
        r"""The pure ε-DP validation releases, {(run_id, key): ε} (summed over repeated records)."""
        found: dict[tuple[str, str], list[PureDP]] = {}
        for run_id, key, event in self._validation_parts():
            if isinstance(event, PureDP):
                found.setdefault((run_id, key), []).append(event)
        return {key: _epsilon_of_pure(events) for key, events in found.items()}

    def validation_run_ids(self) -> list[str]:
        r"""The run ids with at least one validation release, in order of first recording."""
        return list(dict.fromkeys(run_id for run_id, _, _ in self._validation_parts()))

    def validation_release_curves(self) -> list[tuple[str, str, tuple[float, ...]]]:
        r"""``(run_id, key, curve)`` of every validation record, in order: its RDP curve on
        ``RDP_ORDERS`` (the terms ``validation_rdp_curve`` sums)."""
        return [
            (run_id, key, tuple(float(v) for v in event_rdp(event))) for run_id, key, event in self._validation_parts()
        ]

    def validation_mu(self, run_id: str | None = None) -> float:
        r"""Total GDP parameter of the validation data, √Σ_j μ_j² over every record.

        Args:
            run_id: Only that run's releases (what it spent on its own); default all runs,
                which is what the validation users paid.

        Returns:
            μ ≥ 0 (0.0 with no releases, ``inf`` after a non-private one). ``ValueError`` when
            the releases asked about include an RDP entry: no μ covers it (use
            ``validation_epsilon`` or ``validation_rdp_curve``).
        """
        events = self._validation_events(run_id)
        if not gdp_only(events):
            which = "the validation side" if run_id is None else f"run {run_id!r}"
            example = next(e for e in events if isinstance(e, ValidationMechanism))
            raise ValueError(
                f"{which} holds releases given by a Renyi-DP curve (e.g. {example.description!r}), which no "
                "GDP mu covers: use validation_epsilon(delta) or validation_rdp_curve()."
            )
        return compose_gdp(e.mu for e in events)

    def validation_rdp_curve(self, run_id: str | None = None) -> tuple[float, ...]:
        r"""The composed RDP curve of the validation releases on ``RDP_ORDERS`` (zeros with none)."""
        return tuple(float(v) for v in validation_rdp_curve(self._validation_events(run_id)))

    def validation_epsilon(self, delta: float) -> float:
        r"""ε at ``delta`` of the validation data, all runs: the exact GDP conversion while the
        side is GDP only, the RDP conversion of ``validation_rdp_curve`` otherwise."""
        events = self._validation_events()
        if gdp_only(events):
            return gdp_epsilon(compose_gdp(e.mu for e in events), delta)
        return rdp_grid_epsilon(validation_rdp_curve(events), check_delta(delta))[0]

    @synced
    def remaining_validation_mu(self) -> float:
        r"""The μ of the largest further Gaussian release the budget allows, counting every record
        and reservation of all runs (``inf`` without a budget)."""
        return remaining_validation_mu(self._validation_budget(), self._spent("validation"))

    @synced
    def check_admits(self, bound: Mapping[str, Any], what: str = "the next release") -> None:
        r"""Raise ``PrivacyBudgetExceeded`` if ``charge(bound)`` would be refused now, holding and
        recording nothing: a caller can refuse before paying for what a release needs (``DPGIBO.ask``
        checks the next step before its batch is evaluated). ``charge`` checks again, since other
        runs may spend in between."""
        events = list(check_validation_bound(bound).values())
        check_validation_admits(self._validation_budget(), self._spent("validation"), events, what)

    # --------------------------------------------------------------- training
    @property
    def training_runs(self) -> dict[Any, DPSGDRun]:
        r"""The recorded DP-SGD training runs, {run_id: (σ, q, steps)}."""
        return {r.run_id: r.event for r in self.training_records() if isinstance(r.event, DPSGDRun)}

    @property
    def training_mechanisms(self) -> dict[Any, TrainingMechanism]:
        r"""The training entries given by an RDP curve, {run_id: TrainingMechanism}."""
        return {r.run_id: r.event for r in self.training_records() if isinstance(r.event, TrainingMechanism)}

    @property
    def training_approximate(self) -> dict[Any, ApproximateDP]:
        r"""The training entries known by an ``(ε, δ)`` statement, {run_id: ApproximateDP}."""
        return {r.run_id: r.event for r in self.training_records() if isinstance(r.event, ApproximateDP)}

    def training_run_ids(self) -> list[Any]:
        r"""The ids of all training entries, in recording order."""
        return [r.run_id for r in self.training_records()]

    def training_history(self) -> list[DPSGDRun]:
        r"""The DP-SGD runs as an Opacus accountant history ``(σ, q, steps)``, in recording order."""
        return [event for event in self._training_events() if isinstance(event, DPSGDRun)]

    def training_rdp_curve(self) -> tuple[float, ...]:
        r"""The composed RDP curve on ``TRAINING_RDP_ORDERS`` of all training entries but the
        ``ApproximateDP`` ones (which have none; ``training_epsilon`` adds them)."""
        return tuple(float(v) for v in training_rdp_curve(self._training_events()))

    def training_accountant_in_use(self, accountant: str | None = None) -> tuple[str, str]:
        r"""Which accountant ``training_epsilon`` uses, and why (``accountant``: ``"rdp"``,
        ``"prv"`` or None for the ledger's, falling back to RDP for non-DP-SGD entries)."""
        return accountant_for(self._training_events(), self.training_accountant, accountant)

    def training_epsilon(self, delta: float, accountant: str | None = None) -> float:
        r"""ε at ``delta`` of all training entries composed (0.0 with none; see
        ``training_accountant_in_use``)."""
        delta = check_delta(delta)
        entries = self._training_events()
        name, _ = accountant_for(entries, self.training_accountant, accountant)
        return training_epsilon_of(entries, delta, name, self.prv_eps_error)[0]

    # ---------------------------------------------------------------- reports
    @synced
    def report(self, delta: float, *, training_delta: float | None = None) -> dict[str, Any]:
        r"""Both guarantees, side by side but never composed (different datasets).

        Args:
            delta: δ for the validation guarantee.
            training_delta: δ for the training guarantee (default: the ledger's, then ``delta``).

        Returns:
            ``{"validation": {...}, "training": {...}}`` with plain values: validation ``mu``
            (None with an RDP entry), ``epsilon``, ``delta``, ``num_steps`` (records of every
            kind, all runs), ``num_runs``, ``mu_budget``, ``remaining_mu``, ``pure_releases``
            (``{"run_id", "key", "epsilon", "mu"}`` each) and, with RDP entries, ``rdp_order``
            and ``rdp_releases`` (``{"run_id", "key", "description"}`` each); training
            ``accountant``, ``accountant_reason``, ``epsilon``, ``delta``, ``rdp_order``,
            ``num_runs``, ``num_dp_sgd_runs``, ``num_mechanisms`` (RDP curves and ``(ε, δ)``
            entries), ``epsilon_budget`` and ``approximate_dp`` (``{"run_id", "description",
            "epsilon", "delta"}`` of each ``ApproximateDP`` entry, composed by basic composition).
        """
        delta = check_delta(delta)
        if training_delta is None:
            training_delta = self.training_delta if self.training_delta is not None else delta
        training_delta = check_delta(training_delta, "training_delta")
        validation_records = self._validation_parts()
        events = [event for _, _, event in validation_records]
        entries = self._training_events()
        accountant, reason = accountant_for(entries, self.training_accountant, None)
        epsilon, order = training_epsilon_of(entries, training_delta, accountant, self.prv_eps_error)
        num_mechanisms = sum(isinstance(e, (TrainingMechanism, ApproximateDP)) for e in entries)
        validation: dict[str, Any] = {
            "mu": compose_gdp(e.mu for e in events) if gdp_only(events) else None,
            "epsilon": self.validation_epsilon(delta),
            "delta": delta,
            "num_steps": len(validation_records),
            "num_runs": len(self.validation_run_ids()),
            "mu_budget": self.validation_mu_budget,
            "remaining_mu": self.remaining_validation_mu(),
            "pure_releases": [
                {"run_id": run_id, "key": key, "epsilon": event.epsilon, "mu": event.mu}
                for run_id, key, event in validation_records
                if isinstance(event, PureDP)
            ],
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
                "epsilon_budget": self.training_epsilon_budget,
                "approximate_dp": [
                    {
                        "run_id": r.run_id,
                        "description": r.event.description,
                        "epsilon": r.event.epsilon,
                        "delta": r.event.delta,
                    }
                    for r in self.training_records()
                    if isinstance(r.event, ApproximateDP)
                ],  # fmt: skip
            },
        }
