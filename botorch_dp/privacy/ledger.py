r"""A ledger of the privacy spent by a tuning run, with budget filters on both datasets.

Validation data (the users whose losses drive the optimizer) is accounted with μ-GDP;
training data used inside each evaluation (DP-SGD, objective perturbation, any mechanism
with a Rényi-DP curve) is accounted separately, in RDP on one public order grid, or with
Opacus's PRV accountant when every training entry is a DP-SGD run. Opacus is imported
only when DP-SGD runs are accounted (``privacy.accountants``), so importing the ledger
and running DP-GIBO with it does not load Opacus. A ledger lives in memory, or, with
``storage=`` and ``dataset=``, in an SQLite or PostgreSQL database shared by many runs and
machines (``privacy.ledger_storage``, which alone imports SQLAlchemy).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, TypeVar, Union

import numpy as np

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon, pure_dp_to_gdp_mu
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.checks import (
    check_choice,
    check_delta,
    check_history_entry,
    check_positive,
)

if TYPE_CHECKING:
    from botorch_dp.privacy.ledger_storage import LedgerStorage, LedgerTransaction, StoredRow

__all__ = [
    "TRAINING_RDP_ORDERS",
    "filter_order",
    "PrivacyBudgetExceeded",
    "PrivacyLedger",
    "TrainingMechanism",
    "ValidationMechanism",
]

RunId = Union[int, str]
Run = tuple[float, float, int]
#: A validation release: (run id, release key), e.g. ("3f2a…", "step-0003").
ReleaseKey = tuple[str, str]
_TRAINING_ACCOUNTANTS = ("rdp", "prv")

#: The public Rényi orders α on which every RDP curve is evaluated and composed:
#: Opacus's default orders 1.1, 1.2, …, 10.9, 12, 13, …, 63, plus 80, 128, 256 and 512
#: (a small ε needs a large α).
TRAINING_RDP_ORDERS: tuple[float, ...] = DEFAULT_RDP_ORDERS
_ORDERS = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)


def _rdp_grid_epsilon(rdp: np.ndarray, delta: float) -> tuple[float, float | None]:
    r"""(ε, α) of an RDP curve on ``TRAINING_RDP_ORDERS`` at ``delta`` (``rdp_curve_epsilon``);
    ``(inf, None)`` when the curve is infinite at every order."""
    epsilon, order = rdp_curve_epsilon(rdp, TRAINING_RDP_ORDERS, delta)
    return (math.inf, None) if not math.isfinite(epsilon) else (epsilon, float(order))


def _order_budgets(epsilon: float, delta: float) -> np.ndarray:
    r"""At each grid order α, the largest summed RDP that converts to ``ε ≤ epsilon``:
    ``epsilon − log(1 − 1/α) + (log δ + log α)/(α − 1)`` (the rule of ``rdp_curve_epsilon``)."""
    return epsilon - np.log1p(-1.0 / _ORDERS) + (math.log(delta) + np.log(_ORDERS)) / (_ORDERS - 1.0)


def filter_order(epsilon: float, delta: float, first_curve: np.ndarray) -> float:
    r"""The one Rényi order at which the training budget filter works.

    An RDP filter is valid for adaptively chosen mechanisms at ONE order fixed in advance
    (Feldman & Zrnic 2021); accepting while *some* order has room is not covered by that
    theorem, because different outcome paths could then rely on different orders. The
    order is fixed by the budget and the FIRST training entry, which is chosen before
    anything computed from the training data exists: the grid order at which the most
    copies of that entry fit the budget, ``argmax_α budget(α)/ε_1(α)``. A sequence of
    identical runs is therefore accepted exactly as long as its grid ε fits.

    Args:
        epsilon: The training ε budget.
        delta: The training δ.
        first_curve: The RDP of the first training entry on ``TRAINING_RDP_ORDERS``.
    """
    budgets = _order_budgets(epsilon, delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        copies = np.where(first_curve > 0, budgets / first_curve, np.where(budgets >= 0, np.inf, -np.inf))
    return float(_ORDERS[int(np.argmax(copies))])


@dataclass(frozen=True)
class TrainingMechanism:
    r"""A training-side mechanism given by its RDP curve on ``TRAINING_RDP_ORDERS``.

    Attributes:
        description: What the mechanism is (e.g. ``"AMP, lambda=3.7, sigma=6.9"``).
        rdp: ε(α) at each order of ``TRAINING_RDP_ORDERS`` (floats ≥ 0, ``inf`` allowed).
    """

    description: str
    rdp: tuple[float, ...]


TrainingEntry = Union[Run, TrainingMechanism]


@dataclass(frozen=True)
class ValidationMechanism:
    r"""A validation release given by its RDP curve on ``TRAINING_RDP_ORDERS`` (e.g. a DP-HyPO run).

    Attributes:
        description: What the release is (e.g. ``"DP-HyPO, E[K] = 10, ..."``).
        rdp: ε(α) at each order of ``TRAINING_RDP_ORDERS`` (floats ≥ 0, ``inf`` allowed).
    """

    description: str
    rdp: tuple[float, ...]


def _gaussian_rdp(mu: float) -> np.ndarray:
    r"""The exact RDP curve of μ-GDP on the grid, α μ²/2 (``inf`` for μ = ∞)."""
    return _ORDERS * (mu * mu / 2.0)


def _pure_rdp(epsilon: float, mu: float) -> np.ndarray:
    r"""An RDP curve of a pure ε-DP release charged μ-GDP: min(α μ²/2, α ε²/2, ε).

    Each term is a valid bound: μ-GDP gives α μ²/2; ε-DP gives ε²/2-zCDP (Bun & Steinke
    2016, Prop. 3.3), i.e. α ε²/2, and D_α ≤ D_∞ ≤ ε."""
    return np.minimum(np.minimum(_gaussian_rdp(mu), _ORDERS * (epsilon * epsilon / 2.0)), epsilon)


class PrivacyBudgetExceeded(RuntimeError):
    r"""Raised before recording a step or run that would exceed the privacy budget."""


_F = TypeVar("_F", bound=Callable[..., Any])
#: The settings stored with a dataset; the budgets among them may be left at None to
#: adopt the stored ones.
_SETTINGS = ("validation_mu_budget", "training_epsilon_budget", "training_delta", "training_accountant", "prv_eps_error")
_BUDGET_SETTINGS = ("validation_mu_budget", "training_epsilon_budget", "training_delta")


def _synced(method: _F) -> _F:
    r"""A reader of a stored ledger: reloads the dataset's entries first (one consistent
    snapshot per outermost call; nothing to do in memory)."""

    @functools.wraps(method)
    def wrapper(self: PrivacyLedger, *args: Any, **kwargs: Any) -> Any:
        if self._storage is None:
            return method(self, *args, **kwargs)
        with self._lock:  # one thread at a time uses (and reloads) the object's copy
            if self._holding:
                return method(self, *args, **kwargs)
            self._holding = True
            try:
                self._load_rows(self._storage.rows(self.dataset))
                return method(self, *args, **kwargs)
            finally:
                self._holding = False

    return wrapper  # type: ignore[return-value]


def _training_entry_to_json(entry: TrainingEntry) -> dict[str, Any]:
    if isinstance(entry, TrainingMechanism):
        return {"description": entry.description, "rdp": list(entry.rdp)}
    sigma, rate, steps = entry
    return {"noise_multiplier": sigma, "sample_rate": rate, "steps": steps}


def _training_entry_from_json(entry: Mapping[str, Any]) -> TrainingEntry:
    if "rdp" in entry:
        return TrainingMechanism(str(entry["description"]), _check_rdp_values(entry["rdp"], "rdp"))
    return check_history_entry(entry["noise_multiplier"], entry["sample_rate"], entry["steps"], steps_name="steps")


def _same_dp_sgd_run(a: Run, b: Run) -> bool:
    return a[2] == b[2] and all(math.isclose(x, y, rel_tol=1e-12) for x, y in zip(a[:2], b[:2]))


def _same_training(a: TrainingEntry, b: TrainingEntry) -> bool:
    if isinstance(a, TrainingMechanism) or isinstance(b, TrainingMechanism):
        return (
            isinstance(a, TrainingMechanism) and isinstance(b, TrainingMechanism)
            and a.description == b.description and _same_curve(a.rdp, b.rdp)
        )
    return _same_dp_sgd_run(a, b)


def _same_setting(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return _close(float(a), float(b))
    return a == b


def _check_positive(value: float | None, name: str) -> float | None:
    return None if value is None else check_positive(value, name)


def _check_label(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValueError(f"{name} must be a non-empty string without surrounding spaces, got {value!r}.")
    return value


def _check_run_id(run_id: Any) -> RunId:
    if isinstance(run_id, bool) or not isinstance(run_id, (int, str)):
        raise ValueError(f"run_id must be a str or an int, got {run_id!r}.")
    return run_id


def _check_rdp_values(values: Any, name: str) -> tuple[float, ...]:
    r"""A curve on the grid: one float ≥ 0 (``inf`` allowed, NaN refused) per order."""
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name} must be a list of {len(TRAINING_RDP_ORDERS)} numbers, got {values!r}.")
    if len(values) != len(TRAINING_RDP_ORDERS):
        raise ValueError(f"{name} must have {len(TRAINING_RDP_ORDERS)} values (one per order), got {len(values)}.")
    checked = []
    for order, value in zip(TRAINING_RDP_ORDERS, values):
        if isinstance(value, (bool, str, bytes)):
            raise ValueError(f"{name} at order {order:g} must be a number, got {value!r}.")
        try:
            value = float(value)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"{name} at order {order:g} must be a number, got {value!r}.") from err
        if math.isnan(value) or value < 0.0:
            raise ValueError(f"{name} at order {order:g} must be >= 0 (inf allowed), got {value!r}.")
        checked.append(value)
    return tuple(checked)


def _close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=1e-9)


def _same_curve(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(_close(x, y) for x, y in zip(a, b, strict=True))


def _evaluate_curve(rdp: Callable[[float], float]) -> tuple[float, ...]:
    r"""``rdp`` evaluated once at every order of the grid, checked."""
    if not callable(rdp):
        raise ValueError(f"rdp must be a callable alpha -> epsilon(alpha), got {rdp!r}.")
    return _check_rdp_values([rdp(order) for order in TRAINING_RDP_ORDERS], "rdp")


def _rdp_curve_of(entries: list[TrainingEntry]) -> np.ndarray:
    r"""The summed RDP curve of training entries on the grid (Opacus loaded for DP-SGD runs)."""
    total = np.zeros_like(_ORDERS)
    for entry in entries:
        if isinstance(entry, TrainingMechanism):
            total += np.asarray(entry.rdp, dtype=np.float64)
    history = _merged_history(entries)
    if history:
        from botorch_dp.privacy.accountants import dp_sgd_rdp

        for sigma, rate, steps in history:
            total += dp_sgd_rdp(noise_multiplier=sigma, sample_rate=rate, steps=steps, orders=_ORDERS)
    return total


def _merged_history(entries: list[TrainingEntry]) -> list[Run]:
    r"""The DP-SGD runs of ``entries``, runs with equal (σ, q) merged into one entry.

    Composition is commutative and RDP linear in the number of steps, so merging changes
    nothing but keeps the PRV accountant fast for many identical runs.
    """
    merged: dict[tuple[float, float], int] = {}
    for entry in entries:
        if not isinstance(entry, TrainingMechanism):
            sigma, rate, steps = entry
            merged[(sigma, rate)] = merged.get((sigma, rate), 0) + steps
    return [(sigma, rate, steps) for (sigma, rate), steps in merged.items()]


class PrivacyLedger:
    r"""Records the privacy spent on validation data and on training data.

    Validation data: every release computed from the validation users (a DP-GIBO
    gradient release, for instance) is recorded with its GDP parameter μ_j under a
    ``(run_id, key)`` pair: ``run_id`` names the run that made it (DP-GIBO uses its
    ``run_id``, a uuid4 hex) and ``key`` the release within the run (DP-GIBO uses
    ``"step-0003"``; a run with several releases per step uses ``"step-0003/grad"``,
    ``"step-0003/norm"``, and a final selection ``"select"``). The total over ALL runs
    is μ = sqrt(Σ_j μ_j²): runs that share a ledger compose (they read the same
    validation users), so two runs of μ = 0.6 give μ = 0.8485. A pure ε-DP release (an
    exponential mechanism) is recorded with ``record_validation_pure`` as
    μ = 2Φ⁻¹(e^ε/(1 + e^ε)) (``analysis.gdp.pure_dp_to_gdp_mu``), its ε kept for reports.
    A validation release known only by its Rényi-DP curve (a DP-HyPO run: no μ-GDP bound
    dominates it) is recorded with ``record_validation_mechanism``, its curve evaluated
    once on ``RDP_ORDERS`` and stored as numbers. While the validation side holds no such
    entry, everything is exactly μ-GDP as above (``validation_mu``, the exact GDP
    ``validation_epsilon``). Once it holds one, the validation side is composed in RDP on
    the grid (``validation_rdp_curve``): each Gaussian release contributes its exact curve
    α μ_j²/2, each pure ε-DP release min(α μ_j²/2, α ε²/2, ε) (its GDP charge, ε²/2-zCDP and
    D_α ≤ ε are all valid bounds), each RDP entry its curve; ``validation_epsilon``
    converts the sum with the training side's rule (``analysis.rdp.rdp_curve_epsilon``),
    and ``validation_mu`` raises ``ValueError`` rather than return a μ that ignores the
    RDP entries (for a ``run_id`` without RDP entries it still answers).

    Training data: each training run is recorded under a ``run_id``, either as a DP-SGD
    run (noise_multiplier, sample_rate, steps) with ``record_training_run``, or as any
    mechanism given by its Rényi-DP curve α ↦ ε(α) with ``record_training_mechanism``
    (objective perturbation, for instance). A curve is evaluated once, when recorded, at
    the public orders ``TRAINING_RDP_ORDERS`` and stored as numbers. The RDP accountant
    composes all entries by summing their curves on that grid (a DP-SGD run enters as
    Opacus's ``compute_rdp(q, σ, steps, orders)``) and converts the sum to (ε, δ) with
    the rule of ``analysis.rdp.rdp_to_epsilon``, minimised over the grid. Opacus's PRV
    accountant is used only when every training entry is a DP-SGD run: asked for
    explicitly on a ledger holding other mechanisms it raises ``ValueError``; as the
    ledger's ``training_accountant`` it falls back to RDP, and ``report`` says which
    accountant was used and why. The training data is a different dataset, so its
    guarantee is reported separately and never composed with the validation one.

    Recording is idempotent on ``(run_id, key)`` and on the training ``run_id`` with the
    same parameters: after resuming from a checkpoint, re-recording a release that is
    already in the ledger changes nothing (this needs the resumed run to keep its run
    id; under a new id a replayed release counts twice, which over-counts but never
    under-counts); a different μ or ε (or different DP-SGD parameters, or a different
    RDP curve or description) under a recorded id raises ``ValueError``, as does the
    same id with another kind of entry. Whoever records must therefore use a fresh id
    for every new release or training run; an id is never "reused" silently at a
    different cost.

    Budget filters: with budgets set, ``record_*`` checks the budget first and raises
    ``PrivacyBudgetExceeded`` without recording anything when it would be exceeded; the
    filter runs over everything in the ledger, all runs together, and must be called
    (``check_validation_step``, ``check_validation_mechanism``, ``check_training_run``,
    ``check_training_mechanism``) before the release is made. Validation (no RDP entry on
    that side; see below otherwise): refuse a release if the composed μ of spent + new
    exceeds the μ budget; this GDP filter stays valid when each μ_j is chosen
    adaptively from earlier releases (Smith & Thakurta 2022, "Fully adaptive composition
    for Gaussian differential privacy"). Training with RDP: refuse an entry if the
    summed RDP of spent + new at ONE order α* exceeds that order's budget
    ε_budget − log(1 − 1/α*) + (log δ + log α*)/(α* − 1), with α* = ``filter_order`` fixed by the budget and
    the first training entry (chosen before anything computed from training data exists). An RDP filter at one order fixed in advance
    stays valid for adaptively chosen mechanisms (Feldman & Zrnic 2021, "Individual
    privacy accounting via a Rényi filter"), and (α*, budget)-RDP converts to
    (ε_budget, δ). Accepting while *any* order has room would let different outcome
    paths rely on different orders, which that theorem does not cover, so the filter
    does not do it (it can refuse an entry whose grid ε, ``training_epsilon``, would still
    fit; that ε is the right report when the runs are fixed in advance). With
    PRV (DP-SGD only) the filter composes spent + new with the PRV accountant, which is
    exact for runs whose parameters are fixed in advance (all evaluations at the same
    public DP-SGD settings, where the filter only decides how many runs fit). A relative
    slack of ``BUDGET_RTOL`` absorbs floating-point rounding, so that T steps of
    μ/sqrt(T) fit a budget of μ.

    Validation with RDP entries (``record_validation_mechanism``/``check_validation_mechanism``):
    while the validation side (recorded and reserved) holds no RDP entry and none is being
    added, the GDP filter above runs unchanged. Otherwise a new validation entry of any kind
    is accepted only if the summed curve of spent + new stays ≤ α B²/2 at EVERY order α of
    ``RDP_ORDERS`` (B the μ budget; α B²/2 is the RDP curve of B-GDP). For GDP-only entries
    this is the same test as Σ μ_j² ≤ B². What is guaranteed: at each grid order α, on
    every outcome path, the accepted entries' RDP costs sum to at most α B²/2 (the GDP filter's
    acceptances before the first RDP entry also satisfy it, as Σ μ_j² ≤ B²), so each order is
    a valid Rényi filter for adaptively chosen entries (Feldman & Zrnic 2021) and the whole
    validation side is (α, α B²/2)-RDP at every grid order at once; refusing an entry because
    another order is full only stops early, which every order's filter allows. The
    guarantee of the budget is therefore the RDP conversion of α B²/2 on the grid
    (``rdp_curve_epsilon``), a little looser than B-GDP's exact ε (it holds for every
    ledger with a budget, so quote it, not B-GDP, when whether an RDP entry is added may
    depend on earlier releases); ``validation_epsilon``
    converts the realised sum, which is the right report when the entries are fixed in
    advance. ``remaining_validation_mu`` is then the largest μ with spent(α) + α μ²/2 ≤
    α B²/2 at every order. The price: a curve that is steep at small orders (private
    selection and DP-HyPO, through their log E[K]/(α − 1) terms) is decided at α = 1.1 and
    needs B well above the μ whose GDP ε matches its own ε (a DP-HyPO run with μ₀ = 0.5,
    E[K] = 5, R = 2, η = 0, ε = 6.3 at δ = 1e-5 like 1.36-GDP, needs B ≥ 7.85); an entry
    with ε(α) = ∞ at some grid order never fits a finite budget.

    Storage: by default the ledger lives in memory (and in DP-GIBO's checkpoints). With
    ``storage=`` (an SQLite file path or ``sqlite:///`` URL, or a PostgreSQL URL) and a
    ``dataset`` name, it lives in a database shared by every run, process and machine
    that opens the same dataset (``privacy.ledger_storage``): the budgets are stored with
    the dataset when it is first opened, and every read reloads the dataset's entries.
    A budget check and the record of a release run in ONE transaction holding the
    dataset's lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT … FOR UPDATE``), so
    concurrent runs can never together overspend. Because callers check before they
    release and record after (the pattern of DP-GIBO and the tuning objectives), a check
    on a stored ledger with a budget RESERVES its cost in the same transaction (a
    ``"reserved"`` row counted by every later check); the next record by the same ledger
    object consumes the reservation (a GDP reservation by its μ², so one check of a
    composed μ covers several records; a validation RDP reservation, which holds the checked
    curve, is dropped by the next ``record_validation_mechanism``; a training reservation is
    turned into the record in place, keeping its position for ``filter_order``). The budget is thus durable in the
    database before anything is released, and a record that fails leaves the reservation
    counted. A reservation whose release never happened (a crash before the release) stays
    counted — an over-count, never an under-count — until ``cancel_reservations`` is called
    by its ledger object. ``load_state_dict`` on a stored ledger merges: entries of the
    state missing from the database are added (not re-checked: they were spent), entries
    in both must agree, nothing is ever deleted.

    Example (25 DP-GIBO steps of μ/sqrt(25) with μ = 1; a 26th step is refused):

        ledger = PrivacyLedger(validation_mu_budget=1.0)
        for t in range(25):
            ledger.record_validation_step(mu=0.2, run_id="run-a", key=f"step-{t:04d}")
        ledger.validation_epsilon(1e-5)  # about 4.377
    """

    #: Version of ``state_dict``. 4: validation releases may also be RDP curves on
    #: ``RDP_ORDERS`` (``record_validation_mechanism``). 3 (training entries may be RDP
    #: curves, validation releases Gaussian or pure ε-DP) and 2 (DP-SGD runs and Gaussian
    #: releases only) are still loaded. 1 (validation releases keyed by step index only, so
    #: runs sharing a ledger were merged) is refused.
    STATE_VERSION = 4
    BUDGET_RTOL = 1e-9
    #: The public order grid of the ledger's RDP curves, both sides (``TRAINING_RDP_ORDERS``).
    RDP_ORDERS = TRAINING_RDP_ORDERS

    def __init__(
        self,
        *,
        validation_mu_budget: float | None = None,
        training_epsilon_budget: float | None = None,
        training_delta: float | None = None,
        training_accountant: str = "rdp",
        prv_eps_error: float = 0.01,
        storage: str | os.PathLike | None = None,
        dataset: str | None = None,
    ) -> None:
        r"""Create an empty ledger, or open a dataset's ledger in a database.

        Args:
            validation_mu_budget: Optional total GDP budget μ for the validation data.
            training_epsilon_budget: Optional ε budget for the training data; needs
                ``training_delta``.
            training_delta: δ at which training ε is measured (budget and report).
            training_accountant: Accountant for the training data, ``"rdp"`` or
                ``"prv"`` (used only while every training entry is a DP-SGD run; RDP
                otherwise).
            prv_eps_error: Accuracy of the PRV accountant when it is used.
            storage: None (in memory), or the database holding the ledger: an SQLite file
                path or ``sqlite:///`` URL, or any SQLAlchemy PostgreSQL URL (e.g.
                ``"postgresql://user@/ledger?host=/run/postgresql"``; needs the ``[db]``
                extra). The first ledger to open ``dataset`` stores these settings with
                it; a later one must pass the same settings, or leave a budget (or
                ``training_delta``) at None to adopt the stored one: any other value
                raises ``ValueError`` (one shared budget has one value; a run may tighten
                its own filter afterwards by lowering ``validation_mu_budget`` on its
                ledger object, which never loosens the stored budget).
            dataset: The dataset's name in ``storage`` (needed with it, refused without).
        """
        self.validation_mu_budget = _check_positive(validation_mu_budget, "validation_mu_budget")
        self.training_epsilon_budget = _check_positive(
            training_epsilon_budget, "training_epsilon_budget"
        )
        self.training_delta = (
            None if training_delta is None else check_delta(training_delta, "training_delta")
        )
        if self.training_epsilon_budget is not None and self.training_delta is None:
            raise ValueError("training_epsilon_budget needs training_delta.")
        self.training_accountant = check_choice(
            training_accountant, "training_accountant", _TRAINING_ACCOUNTANTS
        )
        self.prv_eps_error = _check_positive(prv_eps_error, "prv_eps_error")
        self._validation_steps: dict[ReleaseKey, float] = {}
        self._validation_pure: dict[ReleaseKey, float] = {}
        self._validation_mechanisms: dict[ReleaseKey, ValidationMechanism] = {}
        self._validation_order: list[ReleaseKey] = []  # every validation release, in recording order
        self._training: dict[RunId, TrainingEntry] = {}
        # a stored ledger: the database, its copy of the dataset's entries, the reservations
        self._storage: LedgerStorage | None = None
        self.dataset: str | None = None
        self._stored_settings: dict[str, Any] = {}
        self._holding = False
        self._rows: list[StoredRow] = []
        self._reserved_mus: list[float] = []
        self._reserved_curves: dict[int, np.ndarray] = {}  # seq -> curve of a validation RDP reservation
        self._training_sequence: list[TrainingEntry] = []
        self._owner = uuid.uuid4().hex
        self._lock = threading.RLock()
        if storage is None:
            if dataset is not None:
                raise ValueError("dataset needs storage (the database that holds the dataset's ledger).")
        else:
            self._open(storage, dataset)

    # ------------------------------------------------------------------- storage

    def _settings(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _SETTINGS}

    def _open(self, storage: str | os.PathLike, dataset: Any) -> None:
        r"""Open (or create) ``dataset`` in ``storage`` and adopt its stored settings."""
        from botorch_dp.privacy.ledger_storage import open_storage

        dataset = _check_label(dataset, "dataset") if dataset is not None else None
        if dataset is None:
            raise ValueError("storage needs dataset, the name of the dataset whose budget the ledger holds.")
        store = open_storage(storage)
        given = self._settings()
        stored = store.ensure_dataset(dataset, given)
        for name in _SETTINGS:
            if name in _BUDGET_SETTINGS and given[name] is None:
                continue
            if not _same_setting(given[name], stored.get(name)):
                raise ValueError(
                    f"{name}={given[name]!r} differs from {stored.get(name)!r}, stored with dataset "
                    f"{dataset!r} in {store.url!r} when it was first opened. A shared budget has "
                    f"one value: pass the stored value, or None to adopt it."
                )
        for name in _SETTINGS:
            setattr(self, name, stored.get(name))
        self._storage, self.dataset, self._stored_settings = store, dataset, stored

    @property
    def storage_url(self) -> str | None:
        r"""The SQLAlchemy URL of the ledger's database (None in memory)."""
        return None if self._storage is None else self._storage.url

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._storage is not None:  # reopened (by URL) where it is unpickled
            state["_storage"] = self._storage.url
        state["_holding"] = False
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("_storage"), str):
            from botorch_dp.privacy.ledger_storage import open_storage

            state = {**state, "_storage": open_storage(state["_storage"]), "_owner": uuid.uuid4().hex}
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def _load_rows(self, rows: list[StoredRow]) -> None:
        r"""Replace the copy of the dataset's entries with ``rows`` (in recording order)."""
        validation: dict[ReleaseKey, float] = {}
        pure: dict[ReleaseKey, float] = {}
        mechanisms: dict[ReleaseKey, ValidationMechanism] = {}
        order: list[ReleaseKey] = []
        training: dict[RunId, TrainingEntry] = {}
        reserved: list[float] = []
        reserved_curves: dict[int, np.ndarray] = {}
        sequence: list[TrainingEntry] = []
        for row in rows:
            if row.side == "validation":
                if row.status == "reserved":
                    if "rdp" in row.entry:
                        reserved_curves[row.seq] = np.asarray(_check_rdp_values(row.entry["rdp"], "rdp"))
                    else:
                        reserved.append(float(row.entry["mu"]))
                    continue
                release = (row.run_id, row.key)
                order.append(release)
                if "rdp" in row.entry:
                    mechanisms[release] = ValidationMechanism(
                        str(row.entry["description"]), _check_rdp_values(row.entry["rdp"], "rdp")
                    )
                    continue
                validation[release] = float(row.entry["mu"])
                if "epsilon" in row.entry:
                    pure[release] = float(row.entry["epsilon"])
            else:
                entry = _training_entry_from_json(row.entry)
                sequence.append(entry)
                if row.status == "recorded":
                    training[row.run_id] = entry
        self._rows = list(rows)
        self._validation_steps, self._validation_pure, self._training = validation, pure, training
        self._validation_mechanisms, self._validation_order = mechanisms, order
        self._reserved_mus, self._training_sequence = reserved, sequence
        self._reserved_curves = reserved_curves

    @contextlib.contextmanager
    def _writing(self) -> Iterator[LedgerTransaction | None]:
        r"""In memory: nothing. Stored: the dataset's write transaction, its entries reloaded
        under the lock; everything in the block commits together or not at all."""
        if self._storage is None:
            yield None
            return
        with self._lock, self._storage.transaction(self.dataset) as tx:
            self._holding = True
            try:
                self._load_rows(tx.rows())
                yield tx
            finally:
                self._holding = False

    def _my_reservations(self, side: str) -> list[StoredRow]:
        return [r for r in self._rows if r.side == side and r.status == "reserved" and r.owner == self._owner]

    def _consume_validation_reservation(self, tx: LedgerTransaction | None, mu: float) -> None:
        r"""Take ``mu`` (by μ²) off this ledger object's oldest validation reservation."""
        mine = [] if tx is None else [r for r in self._my_reservations("validation") if "rdp" not in r.entry]
        if not mine:
            return
        row = mine[0]
        held = float(row.entry["mu"])
        left2 = held * held - mu * mu
        self._reserved_mus.remove(held)
        if math.isinf(mu) or left2 <= 1e-9 * held * held:
            tx.delete(row.seq)
        else:
            tx.update(row.seq, entry={"mu": math.sqrt(left2)})
            self._reserved_mus.append(math.sqrt(left2))

    def _consume_validation_curve_reservation(self, tx: LedgerTransaction | None) -> None:
        r"""Drop this ledger object's oldest validation RDP reservation (its release is being recorded)."""
        mine = [] if tx is None else [r for r in self._my_reservations("validation") if "rdp" in r.entry]
        if mine:
            tx.delete(mine[0].seq)
            del self._reserved_curves[mine[0].seq]

    def cancel_reservations(self) -> int:
        r"""Drop the budget this ledger object reserved by checks that no record followed.

        Call it only when those releases were NOT made (e.g. the release raised); a
        reservation left in place over-counts, never under-counts. Nothing to do in memory.

        Returns:
            The number of reservations dropped.
        """
        with self._writing() as tx:
            if tx is None:
                return 0
            mine = self._my_reservations("validation") + self._my_reservations("training")
            for row in mine:
                tx.delete(row.seq)
            return len(mine)

    def _validation_budget(self) -> float | None:
        r"""The budget the filter uses: the object's, never above the stored one."""
        budget = self.validation_mu_budget
        if self._storage is not None:
            stored = self._stored_settings.get("validation_mu_budget")
            budget = stored if budget is None else budget if stored is None else min(budget, stored)
        return budget

    def _training_budget(self) -> float | None:
        budget = self.training_epsilon_budget
        if self._storage is not None:
            stored = self._stored_settings.get("training_epsilon_budget")
            budget = stored if budget is None else budget if stored is None else min(budget, stored)
        return budget

    def _validation_rdp_entries(self) -> bool:
        r"""Whether the validation side holds an RDP entry, recorded or reserved."""
        return bool(self._validation_mechanisms or self._reserved_curves)

    def _release_rdp(self, release: ReleaseKey) -> np.ndarray:
        r"""The RDP curve on the grid of one recorded validation release."""
        if release in self._validation_mechanisms:
            return np.asarray(self._validation_mechanisms[release].rdp, dtype=np.float64)
        mu = self._validation_steps[release]
        if release in self._validation_pure:
            return _pure_rdp(self._validation_pure[release], mu)
        return _gaussian_rdp(mu)

    def _validation_curve(self, releases: Iterator[ReleaseKey] | list[ReleaseKey]) -> np.ndarray:
        r"""The summed RDP curve of recorded validation releases on the grid."""
        total = np.zeros_like(_ORDERS)
        for release in releases:
            total = total + self._release_rdp(release)
        return total

    def _spent_validation_curve(self) -> np.ndarray:
        r"""The summed RDP curve of the recorded releases and of every reservation."""
        total = self._validation_curve(self._validation_order)
        for mu in self._reserved_mus:
            total = total + _gaussian_rdp(mu)
        for curve in self._reserved_curves.values():
            total = total + curve
        return total

    def _spent_validation_mu(self) -> float:
        r"""μ of the recorded releases and of every reservation (only stored ledgers reserve)."""
        if not self._reserved_mus:
            return self.validation_mu()
        return compose_gdp([*self._validation_steps.values(), *self._reserved_mus])

    def _training_spent(self) -> list[TrainingEntry]:
        r"""The training entries the filter counts, in order (stored: reservations too)."""
        return list(self._training_sequence) if self._storage is not None else list(self._training.values())

    # ------------------------------------------------------------------ validation

    @property
    @_synced
    def validation_steps(self) -> dict[ReleaseKey, float]:
        r"""A copy of the recorded Gaussian and pure ε-DP validation releases, {(run_id, key): μ_j},
        in recording order (the RDP entries are in ``validation_mechanisms``)."""
        return dict(self._validation_steps)

    @property
    @_synced
    def validation_mechanisms(self) -> dict[ReleaseKey, ValidationMechanism]:
        r"""A copy of the validation releases given by an RDP curve, {(run_id, key): ValidationMechanism}."""
        return dict(self._validation_mechanisms)

    @_synced
    def validation_run_ids(self) -> list[str]:
        r"""The run ids with at least one validation release (of any kind), in order of first recording."""
        return list(dict.fromkeys(run_id for run_id, _ in self._validation_order))

    @_synced
    def validation_release_curves(self) -> list[tuple[str, str, tuple[float, ...]]]:
        r"""Every validation release with its RDP curve on ``RDP_ORDERS``, in recording order.

        Returns:
            ``(run_id, key, curve)`` per release: α μ²/2 for a Gaussian release,
            min(α μ²/2, α ε²/2, ε) for a pure ε-DP one, the stored curve for an RDP entry
            (the terms ``validation_rdp_curve`` sums).
        """
        return [(rid, key, tuple(float(v) for v in self._release_rdp((rid, key)))) for rid, key in self._validation_order]

    def _run_has_rdp(self, run_id: str | None) -> bool:
        return any(run_id is None or rid == run_id for rid, _ in self._validation_mechanisms)

    @_synced
    def validation_mu(self, run_id: str | None = None) -> float:
        r"""Total GDP parameter of the validation data, sqrt(Σ_j μ_j²).

        Args:
            run_id: If given, only that run's releases (what the run spent on its own);
                default all runs in the ledger, which is what the validation users paid.

        Returns:
            μ ≥ 0 (0.0 with no releases, ``math.inf`` after a non-private one). Raises
            ``ValueError`` when the releases asked about include an RDP entry
            (``record_validation_mechanism``): no μ covers it; use ``validation_epsilon``
            or ``validation_rdp_curve``.
        """
        if self._run_has_rdp(run_id):
            which = "the validation side" if run_id is None else f"run {run_id!r}"
            example = next(m for (rid, _), m in self._validation_mechanisms.items() if run_id in (None, rid))
            raise ValueError(
                f"{which} holds releases given by a Renyi-DP curve (e.g. {example.description!r}), "
                "which no GDP mu covers: use validation_epsilon(delta) or validation_rdp_curve()."
            )
        if run_id is None:
            return compose_gdp(self._validation_steps.values())
        return compose_gdp(mu for (rid, _), mu in self._validation_steps.items() if rid == run_id)

    @_synced
    def validation_rdp_curve(self, run_id: str | None = None) -> tuple[float, ...]:
        r"""The composed RDP curve of the validation releases on ``RDP_ORDERS``.

        Σ_j α μ_j²/2 over the Gaussian releases (the exact curve of μ_j-GDP), Σ min(α μ_j²/2,
        α ε_j²/2, ε_j) over the pure ε-DP ones, plus the curves of the RDP entries.

        Args:
            run_id: If given, only that run's releases; default all runs.

        Returns:
            ε(α) at each order (zeros with no releases).
        """
        releases = [r for r in self._validation_order if run_id is None or r[0] == run_id]
        return tuple(float(v) for v in self._validation_curve(releases))

    @_synced
    def validation_epsilon(self, delta: float) -> float:
        r"""ε at ``delta`` of the validation data, all runs.

        Exact GDP conversion of ``validation_mu`` while the validation side holds Gaussian
        and pure ε-DP releases only; with an RDP entry, the RDP conversion
        (``analysis.rdp.rdp_curve_epsilon``, as for training) of ``validation_rdp_curve``.

        Args:
            delta: The target δ in (0, 1).

        Returns:
            ε ≥ 0 (0.0 with no steps).
        """
        if not self._validation_mechanisms:
            return gdp_epsilon(self.validation_mu(), delta)
        return _rdp_grid_epsilon(self._validation_curve(self._validation_order), check_delta(delta))[0]

    @_synced
    def remaining_validation_mu(self) -> float:
        r"""The μ of the largest further step the validation budget allows.

        Returns:
            sqrt(budget² − spent²), clipped at 0; ``math.inf`` without a budget. With RDP
            entries: the largest μ with spent(α) + α μ²/2 ≤ α budget²/2 at every grid order,
            sqrt(min_α (budget² − 2 spent(α)/α)), clipped at 0.
        """
        budget = self._validation_budget()
        if budget is None or math.isinf(budget):
            return math.inf
        if self._validation_rdp_entries():
            room = budget * budget - 2.0 * self._spent_validation_curve() / _ORDERS
            return math.sqrt(max(float(np.min(room)), 0.0))
        spent = self._spent_validation_mu()
        if math.isinf(spent):
            return 0.0
        return math.sqrt(max(budget * budget - spent * spent, 0.0))

    def check_validation_step(self, mu: float) -> None:
        r"""Raise if one more validation step of GDP parameter ``mu`` exceeds the budget.

        Args:
            mu: The step's GDP parameter μ_t > 0 (``math.inf`` for a non-private step).

        Returns:
            None; raises ``PrivacyBudgetExceeded`` if the step does not fit. On a stored
            ledger with a budget, a step that fits is reserved (see ``PrivacyLedger``):
            the next record by this object consumes the reservation.
        """
        mu = check_positive(mu, "mu")
        if self._storage is None:
            self._check_validation_fits(mu)
            return
        budget = self._validation_budget()
        if budget is None or math.isinf(budget):
            return
        with self._writing() as tx:
            self._check_validation_fits(mu)
            tx.insert(side="validation", status="reserved", entry={"mu": mu}, owner=self._owner)

    def check_validation_mechanism(self, rdp: Callable[[float], float]) -> None:
        r"""Raise if one more validation release with RDP curve ``rdp`` would exceed the budget.

        The filter with RDP entries (see ``PrivacyLedger``): the summed curve of everything
        spent (recorded and reserved) plus this one must stay ≤ α B²/2 at every order of
        ``RDP_ORDERS``.

        Args:
            rdp: The release's RDP curve, a callable α ↦ ε(α) ≥ 0 (evaluated at ``RDP_ORDERS``).

        Returns:
            None; raises ``PrivacyBudgetExceeded`` if the release does not fit. On a stored
            ledger with a budget, a release that fits is reserved (its curve) in the same
            transaction; the next ``record_validation_mechanism`` by this object drops it.
        """
        curve = np.asarray(_evaluate_curve(rdp), dtype=np.float64)
        if self._storage is None:
            self._check_validation_fits(curve=curve)
            return
        budget = self._validation_budget()
        if budget is None or math.isinf(budget):
            return
        with self._writing() as tx:
            self._check_validation_fits(curve=curve)
            tx.insert(
                side="validation", status="reserved", entry={"description": "(checked)", "rdp": list(map(float, curve))},
                owner=self._owner,
            )

    def _check_validation_fits(
        self, mu: float | None = None, *, epsilon: float | None = None, curve: np.ndarray | None = None
    ) -> None:
        r"""The validation filter for one more release: μ-GDP (``mu``), pure ε-DP charged
        ``mu`` (``epsilon`` too) or an RDP ``curve``; GDP while no RDP entry is involved."""
        budget = self._validation_budget()
        if budget is None or math.isinf(budget):
            return
        if curve is None and not self._validation_rdp_entries():
            spent = self._spent_validation_mu()
            total = compose_gdp([spent, mu])
            if total > budget * (1.0 + self.BUDGET_RTOL):
                reserved = " (recorded and reserved, all runs)" if self._reserved_mus else ""
                raise PrivacyBudgetExceeded(
                    f"Validation privacy budget exceeded: a step with mu={mu:.6g} would bring "
                    f"the total to mu={total:.6g}, above the budget mu={budget:.6g}. Spent "
                    f"mu={spent:.6g}{reserved}; remaining mu budget "
                    f"sqrt(budget^2 - spent^2) = {self.remaining_validation_mu():.6g}."
                )
            return
        if curve is None:
            curve = _gaussian_rdp(mu) if epsilon is None else _pure_rdp(epsilon, mu)
        what = "a release given by its RDP curve" if mu is None else f"a release with mu={mu:.6g}"
        total = self._spent_validation_curve() + curve
        allowed = _gaussian_rdp(budget)
        with np.errstate(invalid="ignore"):
            over = total > allowed * (1.0 + self.BUDGET_RTOL)
        if np.any(over):
            i = int(np.argmax(np.where(over, total / allowed, -np.inf)))
            raise PrivacyBudgetExceeded(
                f"Validation privacy budget exceeded: {what} would bring the summed RDP of the "
                f"validation side at order alpha={_ORDERS[i]:g} to {total[i]:.6g}, above "
                f"alpha*budget^2/2 = {allowed[i]:.6g} (the RDP of budget mu={budget:.6g} GDP). With "
                f"releases given by an RDP curve, every order of RDP_ORDERS must stay within it "
                f"(see PrivacyLedger); remaining mu for a Gaussian release: "
                f"{self.remaining_validation_mu():.6g}."
            )

    def record_validation_step(self, mu: float, *, run_id: str, key: str) -> bool:
        r"""Record a validation release, unless ``(run_id, key)`` is already recorded.

        Args:
            mu: The release's GDP parameter μ_j > 0 (``math.inf`` for a non-private one).
            run_id: Non-empty string naming the run (e.g. ``DPGIBO.run_id``, a uuid4 hex).
            key: Non-empty string naming the release within the run (e.g.
                ``"step-0003"``, ``"step-0003/grad"``, ``"step-0003/norm"``, ``"select"``).

        Returns:
            True if the release was recorded, False if it was already there with the same
            μ (a replay after resume). A different μ for a recorded ``(run_id, key)``, or
            a key recorded as another kind of release, raises ``ValueError``; a release over
            the budget raises ``PrivacyBudgetExceeded`` and records nothing.
        """
        mu = check_positive(mu, "mu")
        release = (_check_label(run_id, "run_id"), _check_label(key, "key"))
        return self._record_validation(release, mu, None)

    def record_validation_pure(self, epsilon: float, *, run_id: str, key: str) -> bool:
        r"""Record a pure ε-DP validation release (e.g. an exponential mechanism).

        It is charged as μ = 2Φ⁻¹(e^ε/(1 + e^ε))-GDP (``pure_dp_to_gdp_mu``: the
        smallest μ whose Gaussian trade-off lies below that of ε-DP), so the validation
        side stays μ-GDP; ε is kept for ``report`` (and, once the validation side holds an
        RDP entry, for the tighter curve min(α μ²/2, α ε²/2, ε)). Check the budget first with
        ``check_validation_step(pure_dp_to_gdp_mu(epsilon))``.

        Args:
            epsilon: The release's pure-DP parameter ε > 0 (``math.inf``: non-private).
            run_id: Non-empty string naming the run.
            key: Non-empty string naming the release within the run (e.g. ``"select"``).

        Returns:
            True if recorded, False if ``(run_id, key)`` was already recorded with the
            same ε (a replay after resume). A different ε, or a key recorded as another
            kind of release, raises ``ValueError``; a release over the budget raises
            ``PrivacyBudgetExceeded`` and records nothing.
        """
        epsilon = check_positive(epsilon, "epsilon")
        release = (_check_label(run_id, "run_id"), _check_label(key, "key"))
        return self._record_validation(release, pure_dp_to_gdp_mu(epsilon), epsilon)

    def record_validation_mechanism(
        self, rdp: Callable[[float], float], *, run_id: str, key: str, description: str
    ) -> bool:
        r"""Record a validation release given by its RDP curve (e.g. a whole DP-HyPO run).

        The curve is evaluated once, here, at every order of ``RDP_ORDERS`` and stored as
        numbers; from then on the validation side is composed in RDP (see
        ``PrivacyLedger``). Check the budget first with ``check_validation_mechanism(rdp)``
        (or record before the release, when the curve depends on public parameters only).

        Args:
            rdp: The release's Rényi-DP curve under the validation data's neighbouring
                relation, a callable α ↦ ε(α) ≥ 0 (``math.inf`` where unbounded).
            run_id: Non-empty string naming the run.
            key: Non-empty string naming the release within the run (e.g. ``"select"``).
            description: Non-empty string saying what the release is (kept in reports and
                the state).

        Returns:
            True if recorded, False if ``(run_id, key)`` was already recorded with the same
            curve (up to a relative 1e-9) and description. Another curve or description, or
            a key recorded as another kind of release, raises ``ValueError``; a release over
            the budget raises ``PrivacyBudgetExceeded`` and records nothing.
        """
        release = (_check_label(run_id, "run_id"), _check_label(key, "key"))
        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"description must be a non-empty string, got {description!r}.")
        entry = ValidationMechanism(description, _evaluate_curve(rdp))
        with self._writing() as tx:
            if self._same_validation_mechanism(release, entry):
                self._consume_validation_curve_reservation(tx)  # the replayed release's check
                return False
            self._consume_validation_curve_reservation(tx)
            self._check_validation_fits(curve=np.asarray(entry.rdp, dtype=np.float64))
            if tx is not None:
                tx.insert(
                    side="validation", status="recorded", run_id=release[0], key=release[1],
                    entry={"description": entry.description, "rdp": list(entry.rdp)},
                )
            self._validation_mechanisms[release] = entry
            self._validation_order.append(release)
            return True

    def _record_validation(self, release: ReleaseKey, mu: float, epsilon: float | None) -> bool:
        with self._writing() as tx:
            if self._same_validation(release, mu, epsilon):
                self._consume_validation_reservation(tx, mu)  # the replayed release's check
                return False
            self._consume_validation_reservation(tx, mu)
            self._check_validation_fits(mu, epsilon=epsilon)
            if tx is not None:
                entry = {"mu": mu} if epsilon is None else {"mu": mu, "epsilon": epsilon}
                tx.insert(side="validation", status="recorded", run_id=release[0], key=release[1], entry=entry)
            self._validation_steps[release] = mu
            if epsilon is not None:
                self._validation_pure[release] = epsilon
            self._validation_order.append(release)
            return True

    def _same_validation_mechanism(self, release: ReleaseKey, entry: ValidationMechanism) -> bool:
        r"""True if ``release`` is recorded as this RDP entry, False if it is not recorded;
        ``ValueError`` if it is recorded as anything else."""
        run_id, key = release
        if release in self._validation_steps:
            kind = "a pure epsilon-DP release" if release in self._validation_pure else "a Gaussian release"
            raise ValueError(
                f"Validation release {key!r} of run {run_id!r} is already recorded as {kind} "
                f"(mu={self._validation_steps[release]!r}), not as a release given by an RDP curve."
            )
        recorded = self._validation_mechanisms.get(release)
        if recorded is None:
            return False
        if recorded.description != entry.description or not _same_curve(recorded.rdp, entry.rdp):
            raise ValueError(
                f"Validation release {key!r} of run {run_id!r} is already recorded as "
                f"{recorded.description!r} with its RDP curve, not as {entry.description!r} with this curve."
            )
        return True

    def _same_validation(self, release: ReleaseKey, mu: float, epsilon: float | None) -> bool:
        r"""True if ``release`` is recorded with this cost, False if it is not recorded;
        ``ValueError`` if it is recorded with another."""
        run_id, key = release
        if release in self._validation_mechanisms:
            raise ValueError(
                f"Validation release {key!r} of run {run_id!r} is already recorded as a release "
                f"given by an RDP curve ({self._validation_mechanisms[release].description!r})."
            )
        if release in self._validation_steps:
            recorded = self._validation_steps[release]
            recorded_epsilon = self._validation_pure.get(release)
            if (recorded_epsilon is None) != (epsilon is None):
                kind = "a Gaussian release" if recorded_epsilon is None else "a pure epsilon-DP release"
                raise ValueError(
                    f"Validation release {key!r} of run {run_id!r} is already recorded as {kind} "
                    f"(mu={recorded!r}, epsilon={recorded_epsilon!r})."
                )
            if epsilon is not None and not _close(recorded_epsilon, epsilon):
                raise ValueError(
                    f"Validation release {key!r} of run {run_id!r} is already recorded with "
                    f"epsilon={recorded_epsilon!r}, not epsilon={epsilon!r}."
                )
            if not _close(recorded, mu):
                raise ValueError(
                    f"Validation release {key!r} of run {run_id!r} is already recorded with "
                    f"mu={recorded!r}, not mu={mu!r}."
                )
            return True
        return False

    @property
    @_synced
    def validation_pure_epsilons(self) -> dict[ReleaseKey, float]:
        r"""A copy of the pure ε-DP validation releases, {(run_id, key): ε}, in recording order."""
        return dict(self._validation_pure)

    # -------------------------------------------------------------------- training

    @property
    @_synced
    def training_runs(self) -> dict[RunId, Run]:
        r"""A copy of the recorded DP-SGD training runs, {run_id: (σ, q, steps)}."""
        return {run_id: e for run_id, e in self._training.items() if not isinstance(e, TrainingMechanism)}

    @property
    @_synced
    def training_mechanisms(self) -> dict[RunId, TrainingMechanism]:
        r"""A copy of the training entries given by an RDP curve, {run_id: TrainingMechanism}."""
        return {run_id: e for run_id, e in self._training.items() if isinstance(e, TrainingMechanism)}

    @_synced
    def training_run_ids(self) -> list[RunId]:
        r"""The ids of all training entries (DP-SGD runs and mechanisms), in recording order."""
        return list(self._training)

    @_synced
    def training_history(self) -> list[Run]:
        r"""The DP-SGD training runs as an Opacus accountant history, in recording order.

        Training mechanisms given by an RDP curve are not in it (see
        ``training_rdp_curve`` for the composition of everything).

        Returns:
            A list of (noise_multiplier, sample_rate, num_steps) tuples.
        """
        return list(self.training_runs.values())

    @_synced
    def training_rdp_curve(self) -> tuple[float, ...]:
        r"""The composed RDP curve of all training entries on ``TRAINING_RDP_ORDERS``.

        Returns:
            ε(α) summed over the entries at each order (zeros with no entries).
        """
        return tuple(float(v) for v in _rdp_curve_of(list(self._training.values())))

    def _accountant_for(self, entries: list[TrainingEntry], requested: str | None) -> tuple[str, str]:
        r"""The accountant to compose ``entries`` with, and why."""
        mechanisms = [e for e in entries if isinstance(e, TrainingMechanism)]
        if requested is not None:
            requested = check_choice(requested, "accountant", _TRAINING_ACCOUNTANTS)
            if requested == "prv" and mechanisms:
                raise ValueError(
                    "The PRV accountant composes only DP-SGD runs, but the training side holds "
                    f"{len(mechanisms)} mechanism(s) given by an RDP curve (e.g. "
                    f"{mechanisms[0].description!r}); use accountant='rdp' (the default "
                    "falls back to it)."
                )
            return requested, f"accountant={requested!r} was asked for"
        if self.training_accountant == "rdp":
            return "rdp", "training_accountant='rdp'"
        if mechanisms:
            return "rdp", (
                f"training_accountant='prv' falls back to RDP: {len(mechanisms)} training "
                f"mechanism(s) given by an RDP curve (e.g. {mechanisms[0].description!r}) are "
                "not DP-SGD runs, and the PRV accountant composes only DP-SGD runs"
            )
        return "prv", "training_accountant='prv' and every training entry is a DP-SGD run"

    def _training_epsilon_of(
        self, entries: list[TrainingEntry], delta: float, accountant: str
    ) -> tuple[float, float | None]:
        r"""(ε, optimal order or None) of ``entries`` composed with ``accountant``."""
        if not entries:
            return 0.0, None
        if accountant == "prv":
            from botorch_dp.privacy.accountants import (
                accountant_epsilon,
                make_accountant,
            )

            history = _merged_history(entries)
            return accountant_epsilon(
                make_accountant("prv", history), delta=delta, eps_error=self.prv_eps_error
            ), None
        return _rdp_grid_epsilon(_rdp_curve_of(entries), delta)

    @_synced
    def training_accountant_in_use(self, accountant: str | None = None) -> tuple[str, str]:
        r"""Which accountant ``training_epsilon`` uses, and why.

        Args:
            accountant: ``"rdp"``, ``"prv"`` or None (the ledger's ``training_accountant``,
                falling back to RDP when a training entry is not a DP-SGD run).

        Returns:
            ``(name, reason)``, e.g. ``("rdp", "training_accountant='prv' falls back to
            RDP: ...")``. An explicit ``"prv"`` on a ledger holding a training mechanism
            raises ``ValueError``.
        """
        return self._accountant_for(list(self._training.values()), accountant)

    @_synced
    def training_epsilon(self, delta: float, accountant: str | None = None) -> float:
        r"""ε at ``delta`` of all training entries composed.

        Args:
            delta: The target δ in (0, 1).
            accountant: ``"rdp"`` (sum of the RDP curves on ``TRAINING_RDP_ORDERS``, one
                conversion) or ``"prv"`` (Opacus's PRV accountant; only when every
                training entry is a DP-SGD run, ``ValueError`` otherwise). None: the
                ledger's ``training_accountant``, falling back to RDP when a training
                entry is not a DP-SGD run (``training_accountant_in_use`` says which).

        Returns:
            ε ≥ 0 (0.0 with no entries, ``math.inf`` if an entry had no noise).
        """
        delta = check_delta(delta)
        entries = list(self._training.values())
        name, _ = self._accountant_for(entries, accountant)
        return self._training_epsilon_of(entries, delta, name)[0]

    def _check_training_entry(self, entry: TrainingEntry, what: str) -> None:
        spent_entries = self._training_spent()
        self._check_training_entries(spent_entries, spent_entries + [entry], what)

    def _check_or_reserve_training(self, entry: TrainingEntry, what: str) -> None:
        r"""The training filter for one more ``entry``; a stored ledger with a budget reserves it."""
        if self._storage is None:
            self._check_training_entry(entry, what)
            return
        budget = self._training_budget()
        if budget is None or math.isinf(budget):
            return
        with self._writing() as tx:
            self._check_training_entry(entry, what)
            tx.insert(side="training", status="reserved", entry=_training_entry_to_json(entry), owner=self._owner)

    def _add_training(self, tx: LedgerTransaction | None, run_id: RunId, entry: TrainingEntry, what: str) -> None:
        r"""Check ``entry`` against the filter and record it (stored: in this object's oldest
        training reservation's place, so that the entries' order, and ``filter_order``,
        are those of the checks)."""
        mine = [] if tx is None else self._my_reservations("training")
        if not mine:
            self._check_training_entry(entry, what)
            if tx is not None:
                tx.insert(side="training", status="recorded", run_id=run_id, key="", entry=_training_entry_to_json(entry))
        else:
            rows = [r for r in self._rows if r.side == "training"]
            at = [r.seq for r in rows].index(mine[0].seq)
            spent = self._training_sequence[:at] + self._training_sequence[at + 1:]
            entries = self._training_sequence[:at] + [entry] + self._training_sequence[at + 1:]
            self._check_training_entries(spent, entries, what)
            tx.update(mine[0].seq, entry=_training_entry_to_json(entry), status="recorded", run_id=run_id, key="")
            self._training_sequence = entries
        self._training[run_id] = entry

    def _drop_training_reservation(self, tx: LedgerTransaction | None) -> None:
        r"""A replayed training run's check: its reservation is dropped (the run is recorded)."""
        mine = [] if tx is None else self._my_reservations("training")
        if mine:
            tx.delete(mine[0].seq)

    def _check_training_entries(self, spent_entries: list[TrainingEntry], entries: list[TrainingEntry], what: str) -> None:
        r"""Raise ``PrivacyBudgetExceeded`` unless ``entries`` (``spent_entries`` and the new
        one, in recording order) fit the training budget."""
        budget = self._training_budget()
        if budget is None or math.isinf(budget):
            return
        delta = self.training_delta
        accountant, _ = self._accountant_for(entries, None)
        if accountant == "rdp":
            order = filter_order(budget, delta, _rdp_curve_of(entries[:1]))
            i = TRAINING_RDP_ORDERS.index(order)
            total = float(_rdp_curve_of(entries)[i])
            allowed = float(_order_budgets(budget, delta)[i])
            if total > allowed + budget * self.BUDGET_RTOL:
                spent = self._training_epsilon_of(spent_entries, delta, accountant)[0]
                raise PrivacyBudgetExceeded(
                    f"Training privacy budget exceeded: {what} would bring the summed RDP "
                    f"(rdp, delta={delta:.3g}) at the filter's order alpha={order:g} to "
                    f"{total:.6g}, above the {allowed:.6g} that converts to the budget "
                    f"epsilon={budget:.6g}. Spent so far: epsilon={spent:.6g} of {budget:.6g}. The "
                    f"filter works at one order, fixed by the budget and the first training "
                    f"entry, which keeps it valid for adaptively chosen runs (see PrivacyLedger)."
                )
            return
        total = self._training_epsilon_of(entries, delta, accountant)[0]
        if total > budget * (1.0 + self.BUDGET_RTOL):
            spent = self._training_epsilon_of(spent_entries, delta, accountant)[0]
            raise PrivacyBudgetExceeded(
                f"Training privacy budget exceeded: {what} would bring the training epsilon "
                f"({accountant}, delta={delta:.3g}) to {total:.6g}, above the budget "
                f"{budget:.6g}. Spent so far: epsilon={spent:.6g} of {budget:.6g}; epsilons do "
                f"not compose additively, so what is left is a run whose composition with the "
                f"past stays within the budget."
            )

    def check_training_run(
        self, *, noise_multiplier: float, sample_rate: float, steps: int
    ) -> None:
        r"""Raise if one more DP-SGD training run would exceed the training budget.

        Args:
            noise_multiplier: DP-SGD noise multiplier σ ≥ 0 of the run.
            sample_rate: Poisson sampling rate q in (0, 1].
            steps: Number of optimizer steps of the run.

        Returns:
            None; raises ``PrivacyBudgetExceeded`` if the run does not fit.
        """
        run = check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps")
        self._check_or_reserve_training(run, _dp_sgd_what(run))

    def record_training_run(
        self, *, run_id: RunId, noise_multiplier: float, sample_rate: float, steps: int
    ) -> bool:
        r"""Record a DP-SGD training run, unless ``run_id`` is already recorded.

        Args:
            run_id: A string or integer identifying the run (JSON-serialisable).
            noise_multiplier: DP-SGD noise multiplier σ ≥ 0 (0 is non-private).
            sample_rate: Poisson sampling rate q in (0, 1].
            steps: Number of optimizer steps of the run.

        Returns:
            True if recorded, False if ``run_id`` was already there with the same
            parameters; different parameters for a recorded ``run_id`` (or a mechanism
            under it) raise ``ValueError``; a run over the budget raises
            ``PrivacyBudgetExceeded`` and records nothing.
        """
        run_id = _check_run_id(run_id)
        run = check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps")
        with self._writing() as tx:
            if run_id in self._training:
                recorded = self._training[run_id]
                if isinstance(recorded, TrainingMechanism):
                    raise ValueError(
                        f"Training run {run_id!r} is already recorded as the mechanism "
                        f"{recorded.description!r}, not as a DP-SGD run."
                    )
                if not _same_dp_sgd_run(recorded, run):
                    raise ValueError(
                        f"Training run {run_id!r} is already recorded as {recorded!r}, not {run!r}."
                    )
                self._drop_training_reservation(tx)
                return False
            self._add_training(tx, run_id, run, _dp_sgd_what(run))
            return True

    def check_training_mechanism(self, *, rdp: Callable[[float], float]) -> None:
        r"""Raise if one more training mechanism with RDP curve ``rdp`` would exceed the budget.

        Args:
            rdp: The mechanism's RDP curve, a callable α ↦ ε(α) ≥ 0 (evaluated at
                ``TRAINING_RDP_ORDERS``).

        Returns:
            None; raises ``PrivacyBudgetExceeded`` if the mechanism does not fit.
        """
        curve = _evaluate_curve(rdp)
        self._check_or_reserve_training(TrainingMechanism("(checked)", curve), "a mechanism")

    def record_training_mechanism(
        self, run_id: RunId, *, rdp: Callable[[float], float], description: str
    ) -> bool:
        r"""Record a training mechanism given by its RDP curve, unless ``run_id`` is recorded.

        The curve is evaluated once, here, at every order of ``TRAINING_RDP_ORDERS`` and
        stored as numbers; the ledger composes it with the other training entries by
        summing on that grid.

        Args:
            run_id: A string or integer identifying the training run (JSON-serialisable).
            rdp: The mechanism's Rényi-DP curve under the training data's neighbouring
                relation, a callable α ↦ ε(α) returning a number ≥ 0 (``math.inf``
                where the curve is unbounded) for each order α > 1, e.g.
                ``lambda a: amp_rdp(a, clip=..., ...)``.
            description: Non-empty string saying what the mechanism is (kept in reports
                and the state).

        Returns:
            True if recorded, False if ``run_id`` was already there with the same curve
            (up to a relative 1e-9) and description; anything else under a recorded
            ``run_id`` raises ``ValueError``; a mechanism over the budget raises
            ``PrivacyBudgetExceeded`` and records nothing.
        """
        run_id = _check_run_id(run_id)
        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"description must be a non-empty string, got {description!r}.")
        entry = TrainingMechanism(description, _evaluate_curve(rdp))
        with self._writing() as tx:
            if run_id in self._training:
                recorded = self._training[run_id]
                if not _same_training(recorded, entry):
                    what = (
                        f"the mechanism {recorded.description!r} with another RDP curve"
                        if isinstance(recorded, TrainingMechanism)
                        else f"the DP-SGD run {recorded!r}"
                    )
                    raise ValueError(
                        f"Training run {run_id!r} is already recorded as {what}, not as the "
                        f"mechanism {description!r} with this curve."
                    )
                self._drop_training_reservation(tx)
                return False
            self._add_training(tx, run_id, entry, f"the mechanism {description!r}")
            return True

    # --------------------------------------------------------------------- reports

    @_synced
    def report(self, delta: float, *, training_delta: float | None = None) -> dict[str, Any]:
        r"""Both guarantees, side by side but never composed (different datasets).

        Args:
            delta: δ for the validation guarantee.
            training_delta: δ for the training guarantee; defaults to the ledger's
                ``training_delta``, then to ``delta``.

        Returns:
            ``{"validation": {...}, "training": {...}}`` with plain floats/ints/str/None:
            validation ``mu`` (None when the validation side holds an RDP entry: no μ covers
            it), ``epsilon`` (``validation_epsilon``), ``delta``, ``num_steps`` (releases of
            every kind, all runs), ``num_runs``, ``mu_budget``, ``remaining_mu``,
            ``pure_releases`` (a list of ``{"run_id", "key", "epsilon", "mu"}``, the pure ε-DP
            releases), and only when the validation side holds an RDP entry ``rdp_order``
            (the grid order attaining ε) and ``rdp_releases`` (a list of ``{"run_id", "key",
            "description"}``, the releases given by an RDP curve); training
            ``accountant`` (the one used), ``accountant_reason`` (why),
            ``epsilon``, ``delta``, ``rdp_order`` (the order attaining ε under RDP, else
            None), ``num_runs`` (all entries), ``num_dp_sgd_runs``,
            ``num_mechanisms``, ``epsilon_budget``.
        """
        delta = check_delta(delta)
        if training_delta is None:
            training_delta = self.training_delta if self.training_delta is not None else delta
        training_delta = check_delta(training_delta, "training_delta")
        entries = list(self._training.values())
        accountant, reason = self._accountant_for(entries, None)
        epsilon, order = self._training_epsilon_of(entries, training_delta, accountant)
        num_mechanisms = sum(isinstance(e, TrainingMechanism) for e in entries)
        validation: dict[str, Any] = {
            "mu": None if self._validation_mechanisms else self.validation_mu(),
            "epsilon": self.validation_epsilon(delta),
            "delta": delta,
            "num_steps": len(self._validation_order),
            "num_runs": len(self.validation_run_ids()),
            "mu_budget": self.validation_mu_budget,
            "remaining_mu": self.remaining_validation_mu(),
            "pure_releases": [
                {"run_id": run_id, "key": key, "epsilon": eps, "mu": self._validation_steps[(run_id, key)]}
                for (run_id, key), eps in self._validation_pure.items()
            ],
        }
        if self._validation_mechanisms:
            validation["rdp_order"] = _rdp_grid_epsilon(self._validation_curve(self._validation_order), delta)[1]
            validation["rdp_releases"] = [
                {"run_id": run_id, "key": key, "description": m.description}
                for (run_id, key), m in self._validation_mechanisms.items()
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
            },
        }

    # ---------------------------------------------------------------- persistence

    @_synced
    def state_dict(self) -> dict[str, Any]:
        r"""The ledger's full state as plain values (``json.dumps``-able).

        Infinite μ or ε(α) is stored as ``float("inf")``, which Python's ``json`` writes
        as ``Infinity`` and reads back.

        Returns:
            A dict with the version, the budget settings, ``rdp_orders`` (the grid of
            the stored curves), ``validation_steps`` as a list of ``{"run_id", "key",
            "mu"}`` dicts (with ``"epsilon"`` too for a pure ε-DP release), or ``{"run_id",
            "key", "description", "rdp"}`` for a release given by its RDP curve, and
            ``training_runs`` as a list of dicts, ``{"run_id", "noise_multiplier",
            "sample_rate", "steps"}`` for a DP-SGD run or ``{"run_id", "description",
            "rdp"}`` for a mechanism, both lists in recording order.
        """
        validation = []
        for run_id, key in self._validation_order:
            entry: dict[str, Any] = {"run_id": run_id, "key": key}
            if (run_id, key) in self._validation_mechanisms:
                mechanism = self._validation_mechanisms[(run_id, key)]
                entry.update(description=mechanism.description, rdp=list(mechanism.rdp))
            else:
                entry["mu"] = self._validation_steps[(run_id, key)]
                if (run_id, key) in self._validation_pure:
                    entry["epsilon"] = self._validation_pure[(run_id, key)]
            validation.append(entry)
        training = []
        for run_id, e in self._training.items():
            if isinstance(e, TrainingMechanism):
                training.append({"run_id": run_id, "description": e.description, "rdp": list(e.rdp)})
            else:
                s, q, n = e
                training.append({"run_id": run_id, "noise_multiplier": s, "sample_rate": q, "steps": n})
        return {
            "version": self.STATE_VERSION,
            "validation_mu_budget": self.validation_mu_budget,
            "training_epsilon_budget": self.training_epsilon_budget,
            "training_delta": self.training_delta,
            "training_accountant": self.training_accountant,
            "prv_eps_error": self.prv_eps_error,
            "rdp_orders": list(TRAINING_RDP_ORDERS),
            "validation_steps": validation,
            "training_runs": training,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        r"""Replace the ledger's state (settings and records) with a saved one.

        Args:
            state_dict: A mapping produced by ``state_dict`` (possibly via JSON), of
                version 4, 3 or 2.

        Returns:
            None. The budgets are not re-checked: a checkpoint records what was spent.
            A state of another version, or a damaged one, raises ``ValueError`` and
            leaves the ledger unchanged. Versions 3 (no validation RDP entries) and 2
            (DP-SGD runs and Gaussian releases only) are loaded as they are. Version 1 is refused rather than migrated: it
            keyed validation steps by step index only, so two runs that shared a ledger
            were stored as one, and a migration would carry that under-count over. A
            version 3 or 4 state whose ``rdp_orders`` differ from ``TRAINING_RDP_ORDERS`` is
            refused: its curves cannot be re-evaluated on this grid. On a stored ledger
            the state is MERGED into the dataset (one transaction): its entries missing
            from the database are added, those present must agree (``ValueError``
            otherwise, nothing changed), nothing is deleted; its settings must equal the
            stored ones, and its budgets become this object's if they do not loosen the
            stored ones.
        """
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"A ledger state must be a mapping, got {type(state_dict).__name__}.")
        version = state_dict.get("version")
        if version == 1:
            raise ValueError(
                "Ledger state version 1 is not supported: it keyed validation steps by step "
                "index only, so runs that shared the ledger were counted as one and the total "
                "may be under-counted. Start a new ledger (version "
                f"{self.STATE_VERSION}), and add what the old one recorded by hand if needed."
            )
        if version not in (2, 3, self.STATE_VERSION) or isinstance(version, bool):
            raise ValueError(
                f"Unsupported ledger state version {version!r} (expected {self.STATE_VERSION}, 3 or 2)."
            )
        if version >= 3:
            orders = state_dict.get("rdp_orders")
            if not (
                isinstance(orders, list)
                and len(orders) == len(TRAINING_RDP_ORDERS)
                and all(
                    isinstance(a, (int, float)) and not isinstance(a, bool) and _close(float(a), b)
                    for a, b in zip(orders, TRAINING_RDP_ORDERS)
                )
            ):
                raise ValueError(
                    "Ledger state: rdp_orders differ from this version's TRAINING_RDP_ORDERS; "
                    "its RDP curves cannot be composed on this grid."
                )
        fresh = PrivacyLedger(
            validation_mu_budget=state_dict.get("validation_mu_budget"),
            training_epsilon_budget=state_dict.get("training_epsilon_budget"),
            training_delta=state_dict.get("training_delta"),
            training_accountant=state_dict.get("training_accountant", "rdp"),
            prv_eps_error=state_dict.get("prv_eps_error", 0.01),
        )
        gaussian, pure = ("run_id", "key", "mu"), ("run_id", "key", "mu", "epsilon")
        validation_rdp = ("run_id", "key", "description", "rdp")
        dp_sgd, mechanism = ("run_id", "noise_multiplier", "sample_rate", "steps"), ("run_id", "description", "rdp")
        newer = version >= 3
        shapes = {2: (gaussian,), 3: (gaussian, pure)}.get(version, (gaussian, pure, validation_rdp))
        for entry in _entries(state_dict, "validation_steps", shapes):
            release = (_check_label(entry["run_id"], "run_id"), _check_label(entry["key"], "key"))
            if release in fresh._validation_steps or release in fresh._validation_mechanisms:
                raise ValueError(f"Repeated validation release {release!r}.")
            fresh._validation_order.append(release)
            if "rdp" in entry:
                description = entry["description"]
                if not isinstance(description, str) or not description.strip():
                    raise ValueError(f"description must be a non-empty string, got {description!r}.")
                fresh._validation_mechanisms[release] = ValidationMechanism(
                    description, _check_rdp_values(entry["rdp"], "rdp")
                )
                continue
            mu = check_positive(entry["mu"], "mu")
            if "epsilon" in entry:
                epsilon = check_positive(entry["epsilon"], "epsilon")
                if not _close(mu, pure_dp_to_gdp_mu(epsilon)):
                    raise ValueError(
                        f"Validation release {release!r}: mu={mu!r} is not the GDP conversion "
                        f"of its epsilon={epsilon!r}."
                    )
                fresh._validation_pure[release] = epsilon
            fresh._validation_steps[release] = mu
        for entry in _entries(state_dict, "training_runs", (dp_sgd, mechanism) if newer else (dp_sgd,)):
            run_id = _check_run_id(entry["run_id"])
            if run_id in fresh._training:
                raise ValueError(f"Repeated training run id {run_id!r}.")
            if "rdp" in entry:
                description = entry["description"]
                if not isinstance(description, str) or not description.strip():
                    raise ValueError(f"description must be a non-empty string, got {description!r}.")
                fresh._training[run_id] = TrainingMechanism(description, _check_rdp_values(entry["rdp"], "rdp"))
            else:
                fresh._training[run_id] = check_history_entry(
                    entry["noise_multiplier"], entry["sample_rate"], entry["steps"], steps_name="steps"
                )
        if self._storage is None:
            self.__dict__.update(fresh.__dict__)
            return
        self._merge(fresh)

    def _merge(self, fresh: PrivacyLedger) -> None:
        r"""``load_state_dict`` on a stored ledger: add the state's entries that the database
        lacks (unchecked: they were spent), check those it has; its budgets become this
        object's (they may only tighten the stored ones)."""
        stored = self._stored_settings
        for name in ("training_accountant", "prv_eps_error", "training_delta"):
            value = getattr(fresh, name)
            if not (value is None and name == "training_delta") and not _same_setting(value, stored.get(name)):
                raise ValueError(
                    f"Ledger state: {name}={value!r} differs from {stored.get(name)!r}, stored with "
                    f"dataset {self.dataset!r}."
                )
        for name in ("validation_mu_budget", "training_epsilon_budget"):
            value, limit = getattr(fresh, name), stored.get(name)
            if value is not None and limit is not None and value > limit * (1.0 + self.BUDGET_RTOL):
                raise ValueError(
                    f"Ledger state: {name}={value!r} is looser than {limit!r}, stored with dataset "
                    f"{self.dataset!r}; a state can only tighten a stored ledger's budget."
                )
        with self._writing() as tx:
            for release in fresh._validation_order:
                if release in fresh._validation_mechanisms:
                    mechanism = fresh._validation_mechanisms[release]
                    if not self._same_validation_mechanism(release, mechanism):
                        tx.insert(
                            side="validation", status="recorded", run_id=release[0], key=release[1],
                            entry={"description": mechanism.description, "rdp": list(mechanism.rdp)},
                        )
                    continue
                mu = fresh._validation_steps[release]
                epsilon = fresh._validation_pure.get(release)
                if not self._same_validation(release, mu, epsilon):
                    entry = {"mu": mu} if epsilon is None else {"mu": mu, "epsilon": epsilon}
                    tx.insert(side="validation", status="recorded", run_id=release[0], key=release[1], entry=entry)
            for run_id, entry in fresh._training.items():
                if run_id not in self._training:
                    tx.insert(side="training", status="recorded", run_id=run_id, key="", entry=_training_entry_to_json(entry))
                elif not _same_training(self._training[run_id], entry):
                    raise ValueError(
                        f"Ledger state: training run {run_id!r} is {entry!r}, but dataset {self.dataset!r} "
                        f"records {self._training[run_id]!r} under it."
                    )
        for name in ("validation_mu_budget", "training_epsilon_budget"):
            value = getattr(fresh, name)
            setattr(self, name, stored.get(name) if value is None else value)

    @classmethod
    def from_state_dict(cls, state_dict: Mapping[str, Any]) -> PrivacyLedger:
        r"""Build a ledger from a saved state.

        Args:
            state_dict: A mapping produced by ``state_dict`` (possibly via JSON).

        Returns:
            The restored ``PrivacyLedger``.
        """
        ledger = cls()
        ledger.load_state_dict(state_dict)
        return ledger


def _dp_sgd_what(run: Run) -> str:
    return f"a run with noise_multiplier={run[0]:.6g}, sample_rate={run[1]:.6g}, steps={run[2]}"


def _entries(
    state_dict: Mapping[str, Any], name: str, shapes: tuple[tuple[str, ...], ...]
) -> list[Mapping[str, Any]]:
    entries = state_dict.get(name, [])
    if not isinstance(entries, list):
        raise ValueError(f"Ledger state: {name} must be a list, got {type(entries).__name__}.")
    allowed = [set(fields) for fields in shapes]
    for entry in entries:
        if not isinstance(entry, Mapping) or set(entry) not in allowed:
            raise ValueError(
                f"Ledger state: each entry of {name} must have exactly the keys "
                f"{' or '.join(map(str, shapes))}, got {entry!r}."
            )
    return entries
