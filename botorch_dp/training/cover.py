r"""A charge recorded once that covers many DP-SGD trials: the token of private selection.

Private selection over whole training runs (Papernot & Steinke, ICLR 2022;
``training.private_selection``) records the WHOLE procedure's RDP curve on the training
ledger once, before its first trial; no trial may then be recorded on its own (the number
of records would be the hidden number of trials ``K``). A ``TrainingCover`` names that
record: the ledger, its run id, and the per-trial reference curve the selection's bound was
computed from (and, for a selection charged at its privacy-profile bound, the run shapes whose
profiles that bound was computed from). A DP-trained objective trains a trial without charging it only under an
open cover (``TorchModelTuningObjective.train_covered``), and checks, before the trial
touches the data, that the cover's record is in its own ledger and that the trial's own
RDP curve lies below the reference at every order of the ledger's grid.

The cover is closed when the selection ends; a closed cover trains nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botorch_dp.privacy.checks import check_positive

__all__ = ["TrainingCover"]


@dataclass(eq=False)
class TrainingCover:
    r"""A recorded charge that covers every trial of one private selection (see the module).

    Made only by ``training.private_selection.select_training_runs``, after it has recorded
    the selection's curve; never returned to the caller.

    Attributes:
        ledger: The ``PrivacyLedger`` that holds the record.
        run_id: The training record's id.
        reference_rdp: ``ε(α)`` of ONE trial at each order of ``TRAINING_RDP_ORDERS``: the curve
            the selection's bound was computed from (every trial's curve must lie below it).
        noise_multiplier: DP-SGD ``σ`` of every trial.
        run_shapes: The ``(sample_rate, steps)`` the charge's bound was computed over (``()``: not
            checked). A selection charged at its privacy-profile bound (one ``(ε, δ)`` record, no
            curve) sets them: its bound is the maximum of these shapes' profiles at ``σ``, so a trial
            must be one of them.
    """

    ledger: Any
    run_id: str
    reference_rdp: tuple[float, ...]
    noise_multiplier: float
    run_shapes: tuple[tuple[float, int], ...] = ()
    _open: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        self.noise_multiplier = check_positive(self.noise_multiplier, "noise_multiplier", allow_inf=False)
        self.reference_rdp = tuple(float(v) for v in self.reference_rdp)
        self.run_shapes = tuple((float(q), int(t)) for q, t in self.run_shapes)

    @property
    def is_open(self) -> bool:
        r"""Whether the selection that made the cover is still running."""
        return self._open

    def close(self) -> None:
        r"""End the cover: no trial trains under it any more."""
        self._open = False
