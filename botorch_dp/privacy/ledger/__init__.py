r"""A ledger of the privacy spent by tuning runs, with budget filters on both datasets.

**Validation data** (the users whose losses drive the optimizer) is accounted with μ-GDP.
Every release is a record ``(release_id, run_id, key, event)``: ``run_id`` names the run
(DP-GIBO's is a uuid4 hex), ``key`` the release within it (``"step-0003"``; a step with
several releases ``"step-0003/grad"``, ``"step-0003/norm"``, ``"step-0003/clip"``,
``"step-0003/precond"``; a final selection ``"select"``; ``events.release_key``), and every
record has its own ``release_id``. The total over ALL records is μ = √Σ_j μ_j²: runs that
share a ledger compose (they read the same validation users), so two runs of μ = 0.6 give
μ = 0.8485, and a step replayed with fresh noise (a retried ``tell``, a checkpoint resumed
twice) is two records. A pure ε-DP release is charged μ = 2Φ⁻¹(e^ε/(1 + e^ε)); a release
known only by its Rényi-DP curve (a DP-HyPO run) is stored as its curve on ``RDP_ORDERS``,
and once the side holds one, it is composed in RDP on that grid (``ledger.validation.mu`` then
raises rather than ignore it; ``ledger.validation.epsilon`` converts the summed curve). A
release known only by one ``(ε, δ)`` statement (``ValidationApproximateDP``: a selection's
Gaussian scores charged at their privacy-profile bound) is composed with the rest by basic
composition (``Σ ε_i`` plus the rest converted at the ``δ − Σ δ_i`` they leave); no μ covers it.
With a validation budget ``μ_B`` and the ledger's ``validation_delta`` ``δ_B``, such entries are
admitted in any number and order with the other validation releases while the side composed at
``δ_B`` is a statement ``μ_B``-GDP makes, ``ε ≤ ε_{μ_B}(δ_B)`` (``filters``: what this covers under
adaptively chosen parameters is stated there); without ``validation_delta``, only as the validation
side's sole entry, with ``ε₁ ≤ ε_{μ_B}(δ₁)``.

**Training data** (DP-SGD, objective perturbation, any mechanism with an RDP curve) is a
different dataset, accounted separately in RDP on the same grid (Opacus's PRV accountant
when every entry is a DP-SGD run) and never composed with the validation side. Each
training run has its own run id. A training entry known only by an ``(ε, δ)`` statement
(``ApproximateDP``: a private selection charged at its privacy-profile bound) is composed with
the rest by basic composition, the RDP part converted at the δ it leaves (``filters``).

**The charge protocol.** ``ledger.charge(bound, run_id=..., step=...)`` checks a step's
worst case — every release it can make, at its largest cost — against the budget,
together with everything recorded and reserved by every run, BEFORE any noise is drawn,
and holds it as a reservation (in memory, or in the database's locked transaction, so
that concurrent runs on many machines can never together overspend). Each mechanism then
calls ``meter.record(part, event)`` immediately before its draw, so a record exists
whenever the noise does; leaving the block gives back what was not used. Training runs
are charged the same way (``charge_training``), recorded before they train. Inside this
package no other code writes records or formats keys (a test walks the package).

**Append-only.** A record is never removed, replaced or merged away: rolling a run back
restores the run, not the ledger; ``load_state_dict`` merges (records it lacks are added,
records under the same ``release_id`` must agree); a retried release is charged again. A
crash may therefore over-count, never under-count.

**Reservations belong to a live holder** (``holders``). A reservation names the process
that holds it (pid, host, node, a random token) and, when stored, a lease the process
renews. A settle (``cancel_reservations``; ``DPGIBO.resume`` calls ``settle_run``) drops
only reservations whose holder is gone (its process ended on this node, or its lease
expired); while a live process holds one, resuming its run is refused by name. A holder
that lost its reservation to an expired lease checks the budget again before it records. A
reservation that names no holder (written before holders) is never settled automatically:
``cancel_reservations(run_id, holderless=True)``.

**Budget filters.** Validation, GDP only: a step is admitted while √(spent² + Σ bound²) ≤ B,
valid for adaptively chosen μ_j (Smith & Thakurta 2022, "Fully adaptive composition for
Gaussian differential privacy"). With RDP entries: admitted while the summed curve of
spent + new stays ≤ α B²/2 at EVERY grid order (α B²/2 is B-GDP's curve); each order is
then a valid Rényi filter (Feldman & Zrnic 2021), the guarantee of the budget is the RDP
conversion of α B²/2 on the grid (a little looser than B-GDP's exact ε), and a curve
steep at small orders (private selection, DP-HyPO) needs B well above the μ whose GDP ε
matches its own (a DP-HyPO run with μ₀ = 0.5, E[K] = 5, R = 2, η = 0, ε = 6.3 at δ = 1e-5,
needs B ≥ 7.85). Training with RDP: admitted while the summed RDP at ONE order α* (fixed by
the budget and the first training entry, ``filters.filter_order``) stays within
ε_B − log(1 − 1/α*) + (log δ + log α*)/(α* − 1); accepting while *some* order has room is
not covered by the filter theorem, so it is not done. With PRV (DP-SGD only) the runs are
composed with the PRV accountant, exact for runs fixed in advance. An ``ApproximateDP``
entry is admitted only as the first training entry: its ``(ε₁, δ₁)`` must fit the budget, and
it leaves ``(ε_B − ε₁, δ_B − δ₁)`` to the RDP filter of every later entry. A relative slack of
``BUDGET_RTOL`` absorbs rounding, so that T steps of μ/√T fit a budget μ.

**Parts.** ``PrivacyLedger`` holds one ``LedgerAccounts`` (``accounts``: its rows, settings and
storage) and three parts that hold the same object: ``ledger.validation`` and
``ledger.training`` (``views``: the reads of each side) and ``ledger.external`` (``external``:
``check(event)`` and ``record(event, run_id=, key=)`` for releases made outside the package).
The charge family and the state are the ledger's own methods; no part inherits from another.
The old method names are forwarded with a ``DeprecationWarning`` (``deprecated``).

**Storage.** In memory by default (and in DP-GIBO's checkpoints, as ``state_dict``). An
in-memory ledger with a budget or records refuses to be pickled (a copy in a worker would
record charges that are then lost); a ledger with ``storage=`` (SQLite path or URL,
PostgreSQL URL) and ``dataset=`` lives in a database shared by every run, process and
machine (``privacy.ledger_storage``) and pickles as its address.
"""

from botorch_dp.privacy.ledger.events import (
    TRAINING_RDP_ORDERS,
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PrivacyEvent,
    PureDP,
    Record,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationMechanism,
    parse_release_key,
    release_key,
)
from botorch_dp.privacy.ledger.filters import PrivacyBudgetExceeded, filter_order
from botorch_dp.privacy.ledger.ledger import PrivacyLedger
from botorch_dp.privacy.ledger.meter import Meter, TrainingMeter

__all__ = [
    "TRAINING_RDP_ORDERS",
    "ApproximateDP",
    "DPSGDRun",
    "Gaussian",
    "Meter",
    "PrivacyBudgetExceeded",
    "PrivacyEvent",
    "PrivacyLedger",
    "PureDP",
    "Record",
    "TrainingMechanism",
    "TrainingMeter",
    "ValidationApproximateDP",
    "ValidationMechanism",
    "filter_order",
    "parse_release_key",
    "release_key",
]
