r"""What a private selection (Papernot–Steinke random search, DP-HyPO, ``tune(strategy="sample")``)
releases, and the guards that keep its hidden number of trials ``K`` and its losing trials hidden.

The selection's guarantee holds for the winner alone: ``K``, every other trial and its score
must not leave the procedure. ``PrivateSelectionResult`` is the winner only (its point, its released
score, the guarantee); ``NonPrivateTrials`` is the whole run, returned only when asked for by
``non_private_trials=True``, and says NON-PRIVATE in its name and ``repr``. While the trials run,
``hidden_trials`` turns any error into one ``HiddenTrialError`` whose type and message do not
depend on the trial it happened in and drops their warnings, and ``selection_progress`` shows
one bar that counts nothing. ``padded_trials`` gives the number of trials run with a public
``max_trials`` (the run's length then does not depend on ``K`` unless ``K > max_trials``).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from torch import Tensor
from tqdm.auto import tqdm

from botorch_dp.baselines.base import BaselineGuarantee, BaselineHistory, BaselineResult
from botorch_dp.privacy.analysis.private_selection_trials import num_trials_tail
from botorch_dp.privacy.checks import check_positive_int

__all__ = [
    "HIDDEN_TRIAL_MESSAGE",
    "PROGRESS_LABEL",
    "HiddenTrialError",
    "PublicRefusal",
    "NonPrivateTrials",
    "PrivateSelectionResult",
    "check_max_trials",
    "hidden_trials",
    "non_private_baseline_result",
    "padded_trials",
    "selection_progress",
    "timing_note",
    "trials_tail",
]

HIDDEN_TRIAL_MESSAGE = (
    "An evaluation failed during the hidden trials of a private selection; nothing was released. "
    "The failing trial and the original error are withheld (they would reveal the number of trials); "
    "make the objective return a q x n tensor (the same n) for every point of the box, and debug it "
    "outside the selection."
)
"""The one message of every ``HiddenTrialError``."""

PROGRESS_LABEL = "private selection (the number of trials stays hidden)"
"""The text of a selection's one progress bar."""


class HiddenTrialError(RuntimeError):
    r"""An error during a selection's hidden trials: always this type and ``HIDDEN_TRIAL_MESSAGE``.

    The original error is not chained (``raise ... from None``), so a traceback does not show it; it
    is still ``__context__`` for debugging, which is NON-PRIVATE (its message may name the trial)."""


@dataclass(frozen=True, eq=False)
class PrivateSelectionResult:
    r"""What a private selection releases: the winner only.

    Attributes:
        theta: The released ``d`` point (the fallback when ``K = 0``).
        released_score: The winner's noisy score (``None`` when ``K = 0``: Poisson only).
        guarantee: The ``(ε, δ)`` statement and the public parameters it rests on.
    """

    theta: Tensor
    released_score: float | None
    guarantee: BaselineGuarantee

    @property
    def is_private(self) -> bool:
        r"""``True``: a selection carries its guarantee."""
        return True

    def private_guarantee(self) -> BaselineGuarantee:
        r"""The guarantee (as ``BaselineResult.private_guarantee``)."""
        return self.guarantee


@dataclass(frozen=True, repr=False, eq=False)
class NonPrivateTrials(PrivateSelectionResult):
    r"""NON-PRIVATE: every trial of a private selection (``non_private_trials=True`` only).

    Publishing anything here but ``release`` voids the selection's guarantee: it holds only while
    the number of trials ``K``, the losing trials and their scores stay hidden. Its ``repr`` and
    ``str`` say so instead of printing the trials. Besides ``PrivateSelectionResult``'s attributes:

    Attributes:
        num_evaluations: ``K``, the number of trials of the selection (padding trials excluded).
        history: The ``BaselineHistory`` of the ``K`` trials (``points``, ``extras["noisy_scores"]``,
            ``extras["released_score"]``, method-specific extras); ``history.public`` is ``False``.
    """

    num_evaluations: int
    history: BaselineHistory

    NON_PRIVATE = True

    @property
    def release(self) -> PrivateSelectionResult:
        r"""The winner only: what may be published."""
        return PrivateSelectionResult(self.theta, self.released_score, self.guarantee)

    def __repr__(self) -> str:
        return (
            f"NonPrivateTrials(NON-PRIVATE: the {self.num_evaluations} trials of a private selection; "
            "publishing any of them, or their number, voids its guarantee; publish .release only)"
        )

    __str__ = __repr__


def non_private_baseline_result(result: PrivateSelectionResult) -> BaselineResult:
    r"""NON-PRIVATE: the trials of a selection run with ``non_private_trials=True`` as a
    ``BaselineResult`` (``num_evaluations = K``, the trials' ``history``), for measurements that
    treat every baseline alike (``ValueError`` for a result that holds the winner only)."""
    if not isinstance(result, NonPrivateTrials):
        raise ValueError("result holds the winner only: run the selection with non_private_trials=True.")
    return BaselineResult(result.theta, result.num_evaluations, result.guarantee, result.history)


def check_max_trials(max_trials: int | None) -> int | None:
    r"""``max_trials``: ``None`` or a positive int (``ValueError`` naming it)."""
    return None if max_trials is None else check_positive_int(max_trials, "max_trials")


def padded_trials(num_trials: int, max_trials: int | None) -> int:
    r"""The trials to run: ``max(K, max_trials)`` (``K`` without a cap). The trials after the
    ``K``-th are run and discarded, so the run's length is ``max_trials`` unless ``K > max_trials``."""
    return num_trials if max_trials is None else max(num_trials, max_trials)


def trials_tail(
    max_trials: int | None,
    *,
    distribution: str,
    mean_trials: float,
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
) -> float | None:
    r"""``P[K > max_trials]``: how often a padded run is longer than ``max_trials`` (``None`` without a cap)."""
    if max_trials is None:
        return None
    return num_trials_tail(
        distribution=distribution,
        mean_trials=mean_trials,
        threshold=max_trials,
        tnb_eta=tnb_eta,
        binomial_rounds=binomial_rounds,
    )


def timing_note(
    max_trials: int | None,
    *,
    distribution: str,
    mean_trials: float,
    tnb_eta: float = 1.0,
    per_trial: str = "trial",
    binomial_rounds: int | None = None,
) -> str:
    r"""What the wall time of a selection reveals, in one sentence, for its guarantee's statement."""
    tail = trials_tail(
        max_trials, distribution=distribution, mean_trials=mean_trials, tnb_eta=tnb_eta, binomial_rounds=binomial_rounds
    )
    if max_trials is None or tail is None:
        return (
            f"Not covered: the run's wall time, which grows with the hidden number of trials K (one {per_trial} "
            "each); pass max_trials to run a fixed number of trials."
        )
    return (
        f"Padded to max_trials = {max_trials} {per_trial}s (the trials after the K-th are run and discarded; "
        f"compute {max_trials / mean_trials:.3g} times E[K]): the run's length does not depend on K unless "
        f"K > {max_trials}, which has probability {tail:.3g}."
    )


class PublicRefusal(ValueError):
    r"""A refusal made from public facts alone at a selection's FIRST objective call (e.g. ``δ ≥ 1/n``
    read off the first losses' shape, ``tuning.tune_checks``): the only error ``hidden_trials`` lets
    through. Its message names no trial, and the first call happens at the first trial whatever ``K``,
    so it shows nothing of ``K`` (beyond ``K ≥ 1``, which a truncated negative binomial ``K`` always is)."""


@contextlib.contextmanager
def hidden_trials() -> Iterator[None]:
    r"""Run a selection's trials: any ``Exception`` becomes ``HiddenTrialError`` (one type, one
    message, from ``None``) and every warning raised inside is dropped (their number or text would
    count or name trials)."""
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            yield
    except PublicRefusal:
        raise
    except Exception:
        raise HiddenTrialError(HIDDEN_TRIAL_MESSAGE) from None


@contextlib.contextmanager
def selection_progress(progress: bool) -> Iterator[None]:
    r"""One progress bar for a whole selection (``progress=True``): ``PROGRESS_LABEL``, written
    when the selection starts and when it ends, with no count, rate or time (the same text for
    every ``K``)."""
    bar = tqdm(total=None, desc=PROGRESS_LABEL, bar_format="{desc}", disable=not progress)
    try:
        yield
    finally:
        bar.close()
