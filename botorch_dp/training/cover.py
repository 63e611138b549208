r"""A charge recorded once that covers many DP-SGD trials: the token of private selection.

Private selection over whole training runs (Papernot & Steinke, ICLR 2022;
``methods.training_runs``) records the WHOLE procedure's RDP curve on the training
ledger once, before its first trial; no trial may then be recorded on its own (the number
of records would be the hidden number of trials ``K``). A ``TrainingCover`` names that
record: the ledger, its run id, and the per-trial reference curve the selection's bound was
computed from (and, for a selection charged at its privacy-profile bound, the run shapes whose
profiles that bound was computed from). A DP-trained objective trains a trial without charging it only under an
open cover (``TorchModelTuningObjective.train_covered``), and checks, before the trial
touches the data, that the cover's record is in its own ledger and that the trial's own
RDP curve lies below the reference at every order of the ledger's grid.

The cover is closed when the selection ends; a closed cover trains nothing.

Every DP-SGD trial, covered or charged alone, is trained by ``train_planned_run``: ``train_model``
followed by the check that Opacus's history of the run is the run that was planned (``same_event``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.ledger import DPSGDRun, TrainingMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig, train_model

#: Relative slack when comparing a trial's RDP curve with the cover's reference (rounding).
CURVE_RTOL = 1e-9

__all__ = ["TrainingCover", "same_event", "train_planned_run"]


@dataclass(eq=False)
class TrainingCover:
    r"""A recorded charge that covers every trial of one private selection (see the module).

    Made only by ``methods.training_runs.select_training_runs``, after it has recorded
    the selection's curve; never returned to the caller.

    Attributes:
        ledger: The ``PrivacyLedger`` that holds the record.
        run_id: The training record's id.
        reference_rdp: ``ε(α)`` of ONE trial at each order of ``TRAINING_RDP_ORDERS``: the curve
            the selection's bound was computed from (every trial's curve must lie below it).
        noise_multiplier: DP-SGD ``σ`` of the reference curve: every trial's where the space does not
            search ``σ``, else the least a trial may have (a trial at ``σ' ≥ σ`` is the run at ``σ``
            with more Gaussian noise added to each step, a post-processing: ``check_trial``).
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

    def check_trial(self, ledger: Any, run: Any) -> None:
        r"""Refuse a trial this cover does not cover, before it touches the data.

        The caller has checked that ``ledger`` is the cover's. Checked here: the cover is open; the
        ledger holds the cover's record (an RDP curve at or above the reference at every order, or,
        for a selection charged at its privacy-profile bound, one ``(ε, δ)`` entry with run shapes);
        the trial's curve lies below the reference; and under a profile charge the trial is one
        of the run shapes (same rate, no more steps, no less noise: a profile no larger, by
        post-processing). A trial noisier than the cover's ``σ`` is checked at the cover's ``σ``: its
        run is that run with independent Gaussian noise added to each step's noisy sum, so that
        run's curve bounds its own whatever rounding ``compute_rdp`` shows at the larger ``σ``.

        Args:
            ledger: The objective's ``PrivacyLedger``.
            run: The trial's planned ``DPSGDRun``.

        Raises:
            RuntimeError: Any of the above fails.
        """
        from botorch_dp.training.selection_accounting import trial_rdp_curve

        reference = self._checked_record(ledger)
        sigma = min(run.noise_multiplier, self.noise_multiplier)  # more noise: post-processing of the cover's σ
        curve = trial_rdp_curve(sigma, [(run.sample_rate, run.steps)])
        if np.any(curve > reference * (1.0 + CURVE_RTOL)):
            raise RuntimeError(f"A run {run} lies above the cover's reference curve: it is not covered.")
        if self.run_shapes and not (
            run.noise_multiplier >= self.noise_multiplier
            and any(math.isclose(run.sample_rate, q, rel_tol=1e-12) and run.steps <= t for q, t in self.run_shapes)
        ):
            raise RuntimeError(
                f"A run {run} is dominated by none of the run shapes of the cover's profile bound "
                f"(at noise_multiplier >= {self.noise_multiplier:g})."
            )

    def _checked_record(self, ledger: Any) -> np.ndarray:
        r"""The reference curve, once the cover is open and ``ledger`` holds a record that covers it."""
        if not self.is_open:
            raise RuntimeError("train_covered trains only under the open TrainingCover of a running private selection.")
        reference = np.asarray(self.reference_rdp, dtype=np.float64)
        recorded = ledger.training.mechanisms().get(self.run_id)
        if recorded is not None:
            covers = bool(np.all(np.asarray(recorded.rdp, dtype=np.float64) >= reference))
        else:  # charged at its privacy-profile bound: one (ε, δ) over the cover's run shapes
            covers = self.run_id in ledger.training.approximate() and bool(self.run_shapes)
        if not covers:
            raise RuntimeError(f"The ledger holds no training record {self.run_id!r} that covers a trial.")
        return reference

    def check_mechanism(self, ledger: Any, event: TrainingMechanism) -> None:
        r"""Refuse a trial of another mechanism (an AMP run) this cover does not cover, before it touches the
        data: the cover is open, ``ledger`` holds its RDP record, and the trial's curve ``event.rdp`` (on
        ``TRAINING_RDP_ORDERS``) lies below the reference at every order (``RuntimeError`` otherwise)."""
        reference = self._checked_record(ledger)
        if self.run_shapes or self.run_id not in ledger.training.mechanisms():
            raise RuntimeError(f"The cover {self.run_id!r} is not an RDP record: it covers DP-SGD runs only.")
        curve = np.asarray(event.rdp, dtype=np.float64)
        if curve.shape != reference.shape or np.any(curve > reference * (1.0 + CURVE_RTOL)):
            raise RuntimeError(
                f"A run ({event.description}) lies above the cover's reference curve: it is not covered."
            )


def same_event(a: Any, b: Any) -> bool:
    r"""Whether two training events describe the same mechanism (up to rounding of ``q`` and ε(α))."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, DPSGDRun) and isinstance(b, DPSGDRun):
        return (
            a.noise_multiplier == b.noise_multiplier
            and a.steps == b.steps
            and math.isclose(a.sample_rate, b.sample_rate, rel_tol=1e-9)
        )
    if isinstance(a, TrainingMechanism) and isinstance(b, TrainingMechanism):
        return a.description == b.description and bool(np.allclose(a.rdp, b.rdp, rtol=1e-9, atol=0.0))
    return False


def train_planned_run(
    model_fn: Callable[[], nn.Module],
    X: Tensor,
    y: Tensor,
    training: TrainingConfig,
    *,
    dp_sgd: DPSGDConfig | None,
    planned: DPSGDRun | TrainingMechanism | None,
    charged_as: str,
    noise_seed: int | None = None,
    optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
    optimizer_kwargs: Mapping[str, Any] | None = None,
    loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
    seed_warned: bool = False,
) -> nn.Module:
    r"""Train one run with ``train_model`` and refuse it unless Opacus accounted the run that was planned.

    The run was charged (or covered) as ``planned`` before it touched the data; a run whose history
    differs (another noise multiplier, sample rate or number of steps) spent what nobody recorded,
    so its model is not returned.

    Args:
        model_fn: Builds the untrained model (``() -> nn.Module``).
        X: The ``m x ...`` training inputs (sensitive).
        y: The ``m`` training targets (sensitive).
        training: The ``TrainingConfig`` of the run.
        dp_sgd: The run's ``DPSGDConfig`` (``None``: non-private training).
        planned: The ``DPSGDRun`` the run was charged or covered as (``None``: a non-private run, which
            Opacus must not have accounted either).
        charged_as: What the run is, for the error (``"a covered trial planned as ..."``).
        noise_seed: The run's DP-SGD seed (``None``: OS entropy; see ``train_model``).
        optimizer: A ``torch.optim.Optimizer`` class (Opacus wraps it).
        optimizer_kwargs: Its keyword arguments.
        loss_fn: ``(outputs, targets) -> m`` per-example losses (``None``: ``train_model``'s default).
        seed_warned: An explicit ``noise_seed`` was already warned about (once, by the caller):
            silence ``train_model``'s ``PrivacyWarning``.

    Returns:
        The trained model (eval mode).

    Raises:
        RuntimeError: Opacus's history of the run is not ``planned``.
    """
    with warnings.catch_warnings():
        if seed_warned:
            warnings.simplefilter("ignore", PrivacyWarning)
        model, history = train_model(
            model_fn,
            X,
            y,
            training,
            optimizer=optimizer,
            optimizer_kwargs=optimizer_kwargs,
            loss_fn=loss_fn,
            dp_sgd=dp_sgd,
            noise_seed=noise_seed,
        )
    if not same_event(None if history is None else DPSGDRun(*history), planned):
        raise RuntimeError(f"Opacus accounted {history} for {charged_as}.")
    return model
