r"""Training runs charged where the ledger lives, trained wherever the rows are evaluated.

An objective whose evaluation trains a model on PRIVATE training data (DP-SGD with Opacus,
AMP objective perturbation) spends the training data's budget with every row it
evaluates. Where a row is trained (this process, a process pool, a Dask worker) must not
decide whether it is counted, so evaluation is split in two halves
(``evaluation.ChargedObjective``):

* ``charge_rows(X)`` runs in the process that holds the ledger (the caller). It numbers one
  training run per row, admits the whole batch with ONE ``ledger.charge_training`` (the
  training budget, plus the objective's own checks such as a DP-SGD target) BEFORE any row
  trains, records every run, and returns one public ``TrainingTicket`` per row. A batch the
  budget cannot cover is refused whole: none of its rows trains.
* ``evaluate_charged(X, tickets)`` runs anywhere. It trains each row under its ticket,
  checks that the mechanism that ran is the one that was charged (``RuntimeError``
  otherwise), and returns the per-user losses. It never reads or writes a ledger.

``objective(X)`` is ``evaluate_charged(X, charge_rows(X))``, and
``evaluation.evaluate_rows(objective, X, executor=...)`` charges on the caller and ships
``(objective, rows, tickets)`` to the workers: a serial run and an executor run record the
same runs, in the caller's ledger.

When the record is made: a batch's runs are all recorded when it is charged, just before
it is dispatched and so before any of its noise is drawn (the ledger's rule: a record
exists whenever the noise does). A row that then fails (its worker dies, AMP refuses to
release, training raises) stays recorded: the ledger may over-count, never under-count.
``train(theta)`` (one run, e.g. the final model) is charged on its own, and its run is
recorded at the draw (DP-SGD: just before training; AMP: by the mechanism, just before it
draws its perturbation).

Copies: pickling such an objective (for a worker) drops an in-memory ledger, which cannot be
shared with another process (a copy would record where the charges are lost). The copy can
only ``evaluate_charged``; asking it to charge raises an error that names the fix. A stored
ledger (``PrivacyLedger(storage=..., dataset=...)``) travels by its database address, and a
copy holding it charges like the original. ``copy.copy``/``copy.deepcopy`` keep the same
ledger (a ledger is never duplicated).

Run ids: run ``i`` is ``f"{run_prefix}-{i:04d}"`` (``f"…-{label}"`` for a labelled run), ``i``
one more than the largest index of the prefix in the ledger, so numbering continues across
objects that share a ledger and a prefix, and after a resume. Numbering and charge happen
under one lock per ledger (per database and dataset when stored) in this process (``train``
holds it until its run is trained: its record is made at the draw); an id the ledger already
holds is skipped. After recording, every index must belong to exactly one
record, else ``RuntimeError`` before anything trains (two processes numbering one prefix of
one stored ledger at the same instant; the ledger's charge refuses recorded ids, not ids
another charge has reserved): give each process its own prefix.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, DPSGDRun, PrivacyLedger, TrainingMechanism
from botorch_dp.training.cover import same_event
from botorch_dp.utils import child_seeds

__all__ = [
    "ChargedTraining",
    "TrainingTicket",
    "amp_training_event",
    "same_event",
    "shared_rows_ledger",
    "shared_training_rows",
    "training_row_digests",
]

#: How many taken run ids a charge skips before it gives up.
_MAX_ID_RETRIES = 1000

_LOCKS: dict[tuple, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


@dataclass(frozen=True)
class TrainingTicket:
    r"""What a worker needs to train one charged row (public, except that the seed is kept out of reprs).

    Attributes:
        run_id: The run's ledger id (None: the row trains without a privacy mechanism).
        event: The mechanism charged for it: a ``DPSGDRun`` or a ``TrainingMechanism`` (None likewise).
        noise_seed: The run's noise seed when the objective has an explicit ``noise_seed``
            (reproductions only); None: fresh OS entropy in the worker.
    """

    run_id: str | None
    event: DPSGDRun | TrainingMechanism | None
    noise_seed: int | None = field(default=None, repr=False)


def amp_training_event(config: Any, dim: int) -> TrainingMechanism:
    r"""The ledger event of one AMP run with ``config`` (an ``AMPConfig``), known before it trains.

    It is what ``ObjectivePerturbationMechanism.perturbation(meter=...)`` records: the
    mechanism's ``cost`` evaluated on ``TRAINING_RDP_ORDERS``, with its description.

    Args:
        config: The run's ``AMPConfig``.
        dim: ``d``, the number of parameters (bias included).

    Returns:
        A ``TrainingMechanism``.
    """
    from botorch_dp.privacy.mechanisms import ObjectivePerturbationMechanism

    cost = ObjectivePerturbationMechanism(dim=dim, **config.privacy_parameters).cost  # nothing is drawn
    return TrainingMechanism(cost.description, tuple(cost.rdp(a) for a in TRAINING_RDP_ORDERS))


# ---------------------------------------------------------------------------- shared training rows
def _row_digests(data: Any) -> list[bytes]:
    r"""One digest per training record of ``data`` (see ``training_row_digests``)."""
    if isinstance(data, (tuple, list)):
        X, y = data[0], data[1]
    else:
        X, y = data.X_train, data.y_train
    X, y = (torch.as_tensor(v if isinstance(v, Tensor) else np.asarray(v)).detach() for v in (X, y))
    rows = (
        torch.cat(
            [
                X.reshape(X.shape[0], -1).to(torch.float32).to(torch.float64),
                y.reshape(y.shape[0], -1).to(torch.float64),
            ],
            dim=1,
        )
        + 0.0
    )
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in np.ascontiguousarray(rows.numpy())]


def training_row_digests(data: Any) -> frozenset[bytes]:
    r"""One 16-byte digest per training record (features and label) of ``data``.

    Two records count as the same when their features agree after rounding to float32 and
    their labels agree (so a float32 copy of float64 rows is recognised); ``-0.0`` and
    ``0.0`` are the same.

    Args:
        data: A ``ClassificationData`` or ``LogisticData`` (``X_train``, ``y_train``), or a tuple
            whose first two entries are the training features and labels.

    Returns:
        The set of digests.
    """
    return frozenset(_row_digests(data))


def shared_training_rows(source: Any, data: Any) -> int:
    r"""How many training records of ``data`` are training records of ``source``.

    Args:
        source: The objective whose training data are sensitive (its ``data``' digests are
            computed once and kept on it).
        data: The other data (``ClassificationData``, ``LogisticData`` or a tuple).

    Returns:
        The number of ``data``'s training records that ``source`` trains on too.
    """
    mine = source.__dict__.get("_training_digests")
    if mine is None:
        mine = source.__dict__["_training_digests"] = training_row_digests(source.data)
    return sum(digest in mine for digest in _row_digests(data))


def same_ledger(a: PrivacyLedger, b: PrivacyLedger) -> bool:
    r"""The same ledger object, or two handles on the same stored dataset."""
    return a is b or (a.storage_url is not None and (a.storage_url, a.dataset) == (b.storage_url, b.dataset))


def shared_rows_ledger(source: Any, data: Any, overrides: dict[str, Any]) -> PrivacyLedger | None:
    r"""The ledger a copy of ``source`` on ``data`` must charge, or None if it may have its own.

    A copy whose training split shares a record with ``source``'s trains on the sensitive
    training data; when ``source`` protects them (DP-SGD: ``source.planned_run()`` is not
    None) the copy's runs are charged to ``source``'s ledger. Refused (``ValueError``): such a
    copy with ``overrides["ledger"]`` another ledger, or with ``overrides["dp_sgd"] = None``
    (training on the sensitive records without noise).

    Args:
        source: The objective (a ``TorchModelTuningObjective``).
        data: The copy's data.
        overrides: The copy's constructor arguments given by the caller.

    Returns:
        ``source``'s ledger, or None (no shared record, or no DP-SGD in ``source``).
    """
    if source.planned_run() is None:
        return None
    shared = shared_training_rows(source, data)
    if not shared:
        return None
    ledger = source._charging_ledger()
    what = f"data shares {shared} training record(s) with this objective's sensitive training data"
    given = overrides.get("ledger")
    if given is not None and not same_ledger(given, ledger):
        raise ValueError(
            f"ledger={given!r}: {what}, so its DP-SGD runs must be charged to this objective's "
            "ledger (leave ledger out), or train the copy on public training data."
        )
    if "dp_sgd" in overrides and overrides["dp_sgd"] is None:
        raise ValueError(f"dp_sgd=None: {what}, which this objective trains on only with DP-SGD.")
    return ledger


# ---------------------------------------------------------------------------- locks
def _ledger_lock(ledger: PrivacyLedger) -> threading.RLock:
    key = ("memory", id(ledger)) if ledger.storage_url is None else ("stored", ledger.storage_url, ledger.dataset)
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.RLock())


_DROPPED = (
    "This copy of the objective was pickled without its in-memory ledger (an executor's worker "
    "holds such a copy): it can only evaluate_charged(X, tickets) with tickets from "
    "charge_rows in the process that holds the ledger. Evaluate through "
    "botorch_dp.evaluation.evaluate_rows(objective, X, executor=...) there, or give the "
    "objective a stored ledger, PrivacyLedger(storage=..., dataset=...), which every process can charge."
)


class ChargedTraining:
    r"""Mixin of tuning objectives that train on private data (see the module docstring).

    A subclass sets ``ledger``, ``run_prefix``, ``noise_seed``, ``data`` and ``dim`` and
    implements ``planned_event(theta, **options)`` (the event of a run at ``theta``, known before
    it trains; None without a privacy mechanism), ``_train_with(theta, ticket, meter,
    **options)`` (train one run; with a ``meter`` it records the run at its draw; it checks
    that what ran is ``ticket.event``) and ``_validation_losses(trained)``; optionally
    ``_check_charge(events)``, run under the numbering lock before the ledger's charge.
    """

    #: Attributes holding this process's trained results, emptied in a pickled copy.
    _PER_PROCESS: tuple[str, ...] = ()

    ledger: PrivacyLedger | None
    run_prefix: str
    noise_seed: int | None
    # provided by the subclass (``SearchSpaceObjective`` has them as properties); annotations only
    dim: int
    num_users: int

    # --------------------------------------------------------------------- hooks
    def planned_event(self, theta: Tensor, **options: Any) -> DPSGDRun | TrainingMechanism | None:
        r"""The ledger event of a run at ``theta`` (a ``d`` tensor), known before it trains.

        Returns:
            A ``DPSGDRun`` or ``TrainingMechanism``; None for a run without a privacy mechanism.
        """
        raise NotImplementedError

    def _train_with(self, theta: Tensor, ticket: TrainingTicket, meter: Any = None, **options: Any) -> Any:
        r"""Train one run at ``theta`` under ``ticket``; with ``meter`` (a run charged alone) record
        ``ticket.run_id`` through it at the draw. Raise ``RuntimeError`` if what ran is not
        ``ticket.event``.

        Returns:
            What ``_validation_losses`` takes (a model, an ``AMPResult``).
        """
        raise NotImplementedError

    def _validation_losses(self, trained: Any) -> Tensor:
        r"""The ``n`` per-user validation losses of a trained run (SENSITIVE)."""
        raise NotImplementedError

    def _check_charge(self, events: list[DPSGDRun | TrainingMechanism]) -> None:
        r"""Extra checks of a batch's runs before it is charged (default: none); raise to refuse it."""

    def check_room(self, num_runs: int, theta: Tensor | None = None) -> None:
        r"""Refuse, before anything trains, ``num_runs`` more runs at ``theta`` (default the cube's
        centre) that the objective's own checks (``_check_charge``, e.g. a DP-SGD target) would
        refuse later; nothing is charged. ``tune`` asks this for the whole procedure first.

        Raises:
            PrivacyBudgetExceeded: From ``_check_charge``, naming the numbers.
        """
        theta = torch.full((self.dim,), 0.5, dtype=torch.float64) if theta is None else theta
        event = self.planned_event(theta)
        if event is not None and num_runs > 0:
            self._check_charge([event] * int(num_runs))

    # --------------------------------------------------------------------- numbering
    def _index_of(self, run_id: Any) -> int | None:
        if not isinstance(run_id, str):
            return None
        match = re.fullmatch(rf"{re.escape(self.run_prefix)}-(\d+)(?:-.*)?", run_id, re.DOTALL)
        return None if match is None else int(match.group(1))

    def next_run_index(self) -> int:
        r"""Index of the next training run: one more than the largest index of ``run_prefix``
        among the ledger's training entries (0 if none), so it continues after a resume and
        across objects sharing the ledger and the prefix.

        Returns:
            An integer ≥ 0.
        """
        indices = [i for i in map(self._index_of, self._charging_ledger().training.run_ids()) if i is not None]
        return max(indices, default=-1) + 1

    def _run_id(self, index: int, label: str | None) -> str:
        return f"{self.run_prefix}-{index:04d}" + ("" if label is None else f"-{label}")

    def _charging_ledger(self) -> PrivacyLedger:
        ledger = self.__dict__.get("ledger")
        if ledger is None:
            raise RuntimeError(_DROPPED)
        return ledger

    def _as_rows(self, X: Tensor) -> Tensor:
        return torch.as_tensor(X, dtype=torch.float64).reshape(-1, self.dim)

    @contextlib.contextmanager
    def _charged(self, events: list[Any], label: str | None) -> Iterator[tuple[list[TrainingTicket], Any]]:
        r"""Number ``events`` (None: no mechanism, no run id), admit them with one charge, and
        yield ``(tickets, meter)``, holding the numbering lock until the block ends."""
        if label is not None and (not isinstance(label, str) or not label or label != label.strip()):
            raise ValueError(f"label must be a non-empty string without surrounding spaces, got {label!r}.")
        charged = [e for e in events if e is not None]
        if not charged:
            yield [TrainingTicket(None, None) for _ in events], None
            return
        ledger = self._charging_ledger()
        with _ledger_lock(ledger), contextlib.ExitStack() as stack:
            self._check_charge(charged)
            start = self.next_run_index()
            for _ in range(_MAX_ID_RETRIES):
                indices = list(range(start, start + len(charged)))
                bound = {self._run_id(i, label): e for i, e in zip(indices, charged, strict=True)}
                try:
                    meter = stack.enter_context(ledger.charge_training(bound))
                    break
                except ValueError:
                    if not set(bound) & set(ledger.training.run_ids()):
                        raise
                    start = max(self.next_run_index(), start + 1)  # taken meanwhile: the next free index
            else:
                raise RuntimeError(f"No free run ids after {_MAX_ID_RETRIES} tries (run_prefix {self.run_prefix!r}).")
            seeds = iter(indices)
            tickets = []
            for event in events:
                if event is None:
                    tickets.append(TrainingTicket(None, None))
                    continue
                i = next(seeds)
                seed = None if self.noise_seed is None else child_seeds([self.noise_seed, i], 1)[0]
                tickets.append(TrainingTicket(self._run_id(i, label), event, seed))
            yield tickets, meter
            self._check_unique(indices)

    def _check_unique(self, indices: list[int]) -> None:
        counts = collections.Counter(map(self._index_of, self._charging_ledger().training.run_ids()))
        clashes = [i for i in indices if counts[i] > 1]
        if clashes:
            raise RuntimeError(
                f"Run index {clashes[0]} of run_prefix {self.run_prefix!r} was recorded twice in the ledger "
                "(another process numbered the same prefix of this stored ledger at the same instant); both "
                "records are counted (an over-count) and nothing was trained under the clashing index here. "
                "Give each process its own run_prefix."
            )

    # --------------------------------------------------------------------- the protocol
    def charge_rows(self, X: Tensor, *, label: str | None = None) -> list[TrainingTicket]:
        r"""Charge one training run per row of ``X`` to the ledger, before any of them trains.

        All of the batch's runs are admitted by one ``ledger.charge_training`` (refused whole:
        ``PrivacyBudgetExceeded``, nothing recorded, nothing trained) and recorded at once.

        Args:
            X: A ``q x d`` (or ``d``) tensor of points (public).
            label: Optional label of the runs' ids.

        Returns:
            One ``TrainingTicket`` per row, for ``evaluate_charged``.
        """
        X = self._as_rows(X)
        events = [self.planned_event(x) for x in X]
        with self._charged(events, label) as (tickets, meter):
            for ticket in tickets:
                if ticket.run_id is not None:
                    meter.record(ticket.run_id)
        self._note_charged(tickets)
        return tickets

    def _note_charged(self, tickets: list[TrainingTicket]) -> None:
        r"""Bookkeeping of this object's charged runs (default: the count)."""
        self.num_trainings = getattr(self, "num_trainings", 0) + len(tickets)

    def evaluate_charged(self, X: Tensor, tickets: Sequence[TrainingTicket]) -> Tensor:
        r"""Per-user validation losses of models trained under ``tickets`` (SENSITIVE); touches no ledger.

        Args:
            X: A ``q x d`` (or ``d``) tensor of points.
            tickets: ``charge_rows(X)``'s tickets, one per row, each used once.

        Returns:
            A ``q x n`` float64 tensor.

        Raises:
            ValueError: A ticket that does not belong to its row (another mechanism).
            RuntimeError: A ticket used before by this object, or a run whose mechanism
                differs from its ticket's.
        """
        X = self._as_rows(X)
        tickets = list(tickets)
        if len(tickets) != X.shape[0] or not all(isinstance(t, TrainingTicket) for t in tickets):
            raise ValueError(f"tickets must be {X.shape[0]} TrainingTickets (one per row of X), got {tickets!r}.")
        used = self.__dict__.setdefault("_used_run_ids", set())
        for j, (x, ticket) in enumerate(zip(X, tickets, strict=True)):
            if not same_event(ticket.event, self.planned_event(x)):
                raise ValueError(
                    f"tickets[{j}] ({ticket.run_id!r}) was charged for {ticket.event!r}, "
                    f"but row {j} of X runs {self.planned_event(x)!r}."
                )
            if ticket.run_id is not None and ticket.run_id in used:
                raise RuntimeError(
                    f"tickets[{j}]: run {ticket.run_id!r} was already trained; a run needs its own charge."
                )
        rows = []
        for x, ticket in zip(X, tickets, strict=True):
            if ticket.run_id is not None:
                used.add(ticket.run_id)
            rows.append(self._validation_losses(self._train_with(x, ticket)))
        if not rows:
            return torch.empty(0, self.num_users, dtype=torch.float64)
        return torch.stack(rows)

    def __call__(self, X: Tensor) -> Tensor:
        r"""Per-user validation losses at each row of ``X`` (SENSITIVE): ``evaluate_charged(X, charge_rows(X))``.

        Args:
            X: A ``q x d`` (or ``d``) tensor of unit-cube points.

        Returns:
            A ``q x n`` float64 tensor, entry ``(j, i)`` = validation user ``i``'s loss under the
            model trained at ``X[j]``.
        """
        X = self._as_rows(X)
        return self.evaluate_charged(X, self.charge_rows(X))

    def _train_alone(self, theta: Tensor, label: str | None, **options: Any) -> Any:
        r"""One run at ``theta`` charged on its own, recorded at its draw."""
        theta = torch.as_tensor(theta, dtype=torch.float64).reshape(self.dim)
        with self._charged([self.planned_event(theta, **options)], label) as (tickets, meter):
            trained = self._train_with(theta, tickets[0], meter, **options)
        self._note_charged(tickets)
        return trained

    # --------------------------------------------------------------------- copies
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        ledger = state.get("ledger")
        if ledger is not None and ledger.storage_url is None:
            state["ledger"] = None  # see _DROPPED
        for name in self._PER_PROCESS:
            state[name] = []
        state["_used_run_ids"] = set()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __copy__(self) -> ChargedTraining:
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update(self.__dict__)
        return new

    def __deepcopy__(self, memo: dict) -> ChargedTraining:
        ledger = self.__dict__.get("ledger")
        if ledger is not None:
            memo[id(ledger)] = ledger  # the copy charges the same ledger
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new
