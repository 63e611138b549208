r"""Which iterate a run returns (Menart et al., spec B2), and what choosing it privately costs.

``Last`` and ``MinNoisyNorm`` are free post-processing. ``Exponential(ε, C)`` and ``NoisyLoss(μ, C)``
evaluate the iterates ``θ_0..θ_T`` on the users once more (one extra batch of ``T + 1``
evaluations) and choose privately from their losses clamped to ``[0, C]`` (part ``"select"``):
the exponential mechanism (``P(j) ∝ exp(−ε u_j/(2Δ))``, ``Δ = C/n``, pure ``ε``-DP charged as
``μ = 2Φ⁻¹(e^ε/(1 + e^ε))``) or Gaussian noisy mean losses whose smallest wins (``μ_sel``-GDP).
Their charge ``μ_sel`` comes off the top of the budget (``BudgetSplit``). ``Evaluated`` is the
shared part of the two evaluated rules here (their release), not the family's type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import torch
from torch import Tensor

from botorch_dp.optim.checkpoint.encoding import is_int, tensor_from_json, tensor_to_json
from botorch_dp.optim.options.records import ResumeContext, RunRecords, compact, payload_entries
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.ledger import Gaussian, Meter, PureDP
from botorch_dp.privacy.mechanisms import ExponentialLossSelection, NoisyLossSelection, SelectionRelease

__all__ = [
    "Evaluated",
    "EvaluatedSelection",
    "Exponential",
    "IterateSelection",
    "Last",
    "MinNoisyNorm",
    "NoisyLoss",
    "SELECTION_KEY",
    "Selection",
    "SelectionRecord",
    "min_noisy_norm_index",
    "restore_selection_state",
    "selection_state_json",
]

#: The registered rules' names (``DPGIBOConfig(selection="exponential")`` and the baselines' keyword).
Selection = Literal["last", "min_noisy_norm", "exponential", "noisy_loss"]
#: The ledger key of the selection release within a run.
SELECTION_KEY = "select"


def min_noisy_norm_index(noisy_norms: Sequence[float]) -> int:
    r"""``argmin_t N_t`` over the released ``N_0, ..., N_{T−1}`` (the first on ties): the iterate whose
    released noisy gradient norm is smallest. Post-processing, free."""
    if len(noisy_norms) == 0:
        raise ValueError("No noisy norms were released yet.")
    return int(torch.argmin(torch.tensor(list(noisy_norms), dtype=torch.float64)))


class IterateSelection(StrategyLike, Protocol):
    r"""Which iterate a run returns: a free rule picks its ``index`` from public values (the
    number of iterates, the released noisy norms); an ``evaluated`` one (``EvaluatedSelection``)
    evaluates the iterates on the users once more and chooses privately, charged ``μ_sel``
    (``charge``) off the top of the budget."""

    @property
    def evaluated(self) -> bool:
        r"""Whether the rule evaluates the iterates (then it is an ``EvaluatedSelection``)."""
        ...

    @property
    def charge(self) -> float:
        r"""``μ_sel``, the selection's GDP charge (0 for a free rule)."""
        ...

    def index(self, num_iterates: int, noisy_norms: tuple[float, ...]) -> int:
        r"""The returned iterate's index (free rules; post-processing)."""
        ...

    def record(
        self, num_iterates: int, noisy_norms: tuple[float, ...], chosen: int | None, scores: Tensor | None
    ) -> SelectionRecord:
        r"""The returned iterate given the released ``noisy_norms`` and an evaluated rule's ``chosen``
        index and released ``scores`` (``PrivateRelease.records["selection"]``)."""
        ...


@runtime_checkable
class EvaluatedSelection(IterateSelection, Protocol):
    r"""A rule that chooses privately from the iterates' clamped loss sums, recorded as ``"select"``."""

    @property
    def loss_clip(self) -> float:
        r"""``C``: each loss is clamped to ``[0, C]``."""
        ...

    def event(self) -> PureDP | Gaussian:
        r"""What the selection spends (charged before its draw)."""
        ...

    def release(
        self, sums: Tensor, num_users: int, meter: Meter, generator: torch.Generator | None
    ) -> SelectionRelease:
        r"""Choose from the candidates' clamped loss sums (SENSITIVE), recorded through ``meter``."""
        ...


@dataclass(frozen=True)
class SelectionRecord:
    r"""What a release carries of the selection (``PrivateRelease.records["selection"]``), public.

    Attributes:
        index: ``j`` with ``theta = iterates[j]`` (``None`` while an evaluated choice is still to
            be made).
        scores: The released noisy mean losses of the iterates (``NoisyLoss``), else ``None``.
    """

    index: int | None
    scores: Tensor | None = None

    def json_fields(self) -> dict[str, Any]:
        r"""Its values under their keys in a release's JSON (``DPGIBOResult.to_json``)."""
        return {"selected_index": self.index, "selection_scores": self.scores}

    def released(self) -> dict[tuple[int | None, str], Any]:
        r"""The choice after the steps (``(None, "select")``): the released scores, else the index (a
        free rule's index is post-processing: a table shows it only where the ledger charged a selection)."""
        if self.scores is None and self.index is None:
            return {}
        return {(None, SELECTION_KEY): self.index if self.scores is None else self.scores}

    def charged(self) -> dict[tuple[int | None, str], float | None]:
        r"""Its charge is not held here (a private choice reads the same as a free one): the ledger's."""
        return dict.fromkeys(self.released())


@register("selection", "last")
@dataclass(frozen=True)
class Last(Strategy):
    r"""Return the last iterate ``θ_T``."""

    evaluated = False
    stateless: ClassVar[bool] = True  # a free rule writes no run records

    @property
    def charge(self) -> float:
        return 0.0

    def index(self, num_iterates: int, noisy_norms: tuple[float, ...]) -> int:
        return num_iterates - 1

    def record(
        self, num_iterates: int, noisy_norms: tuple[float, ...], chosen: int | None, scores: Tensor | None
    ) -> SelectionRecord:
        return SelectionRecord(self.index(num_iterates, noisy_norms))  # a free rule ignores chosen and scores


@register("selection", "min_noisy_norm")
@dataclass(frozen=True)
class MinNoisyNorm(Strategy):
    r"""Return the iterate whose released noisy gradient norm is smallest (post-processing)."""

    evaluated = False
    stateless: ClassVar[bool] = True  # a free rule writes no run records
    requires = frozenset({"noisy_norms"})

    @property
    def charge(self) -> float:
        return 0.0

    def index(self, num_iterates: int, noisy_norms: tuple[float, ...]) -> int:
        return min_noisy_norm_index(noisy_norms) if noisy_norms else num_iterates - 1

    def record(
        self, num_iterates: int, noisy_norms: tuple[float, ...], chosen: int | None, scores: Tensor | None
    ) -> SelectionRecord:
        return SelectionRecord(self.index(num_iterates, noisy_norms))


class Evaluated(Strategy):
    r"""The shared part of ``Exponential`` and ``NoisyLoss``: a rule that evaluates the iterates and
    chooses privately through its ``mechanism`` (recorded as ``"select"``)."""

    evaluated = True
    needs_finite_mu = "spends budget"
    #: Whether the rule releases a score per iterate (kept with its choice: ``NoisyLoss``).
    releases_scores: ClassVar[bool] = False
    #: ``C``: the losses are clamped to ``[0, C]`` (a field of each evaluated rule; this class is no dataclass)
    loss_clip: float

    def index(self, num_iterates: int, noisy_norms: tuple[float, ...]) -> int:
        r"""The last iterate's index (what the run holds until the private choice is made)."""
        return num_iterates - 1

    def event(self) -> PureDP | Gaussian:
        raise NotImplementedError

    def mechanism(self, generator: torch.Generator | None) -> ExponentialLossSelection | NoisyLossSelection:
        raise NotImplementedError

    def release(
        self, sums: Tensor, num_users: int, meter: Meter, generator: torch.Generator | None
    ) -> SelectionRelease:
        return self.mechanism(generator).release_sums(sums, num_users, meter=meter, part=SELECTION_KEY)

    def record(
        self, num_iterates: int, noisy_norms: tuple[float, ...], chosen: int | None, scores: Tensor | None
    ) -> SelectionRecord:
        r"""The private choice (``None`` until made) and its released scores (a copy)."""
        return SelectionRecord(chosen, None if scores is None else scores.clone())

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return selection_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_selection_state(payload, records, context, scores=self.releases_scores)


@register("selection", "exponential")
@dataclass(frozen=True)
class Exponential(Evaluated):
    r"""The exponential mechanism on the iterates' mean losses clamped to ``[0, C]`` (pure ``ε``-DP,
    charged ``μ_sel = 2Φ⁻¹(e^ε/(1 + e^ε))``)."""

    epsilon: float = 1.0
    loss_clip: float = 1.0
    by_name_needs = "its epsilon (ε_sel) and loss_clip (C)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "selection_epsilon", allow_inf=False))
        object.__setattr__(self, "loss_clip", check_positive(self.loss_clip, "loss_clip", allow_inf=False))

    @property
    def charge(self) -> float:
        return pure_dp_to_gdp_mu(self.epsilon)

    def event(self) -> PureDP | Gaussian:
        return PureDP(self.epsilon)

    def mechanism(self, generator: torch.Generator | None) -> ExponentialLossSelection | NoisyLossSelection:
        return ExponentialLossSelection(epsilon=self.epsilon, loss_clip=self.loss_clip, generator=generator)


@register("selection", "noisy_loss")
@dataclass(frozen=True)
class NoisyLoss(Evaluated):
    r"""Gaussian noisy mean losses (clamped to ``[0, C]``) of all iterates, the smallest wins (``μ_sel``-GDP
    for all scores together)."""

    by_name_needs = "its mu (μ_sel) and loss_clip (C)"
    releases_scores = True

    mu: float = 1.0
    loss_clip: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", check_positive(self.mu, "selection_mu", allow_inf=False))
        object.__setattr__(self, "loss_clip", check_positive(self.loss_clip, "loss_clip", allow_inf=False))

    @property
    def charge(self) -> float:
        return float(self.mu)

    def event(self) -> PureDP | Gaussian:
        return Gaussian(self.mu)

    def mechanism(self, generator: torch.Generator | None) -> ExponentialLossSelection | NoisyLossSelection:
        return NoisyLossSelection(total_mu=self.mu, loss_clip=self.loss_clip, generator=generator)


# ----------------------------------------------------------------------- a run's record, saved
def selection_state_json(records: RunRecords) -> dict[str, Any]:
    r"""An evaluated selection's part of the run's records as exact JSON: its choice (once made) and its
    released scores."""
    scores = records.selection_scores
    return compact(
        {"selected_index": records.selected, "selection_scores": None if scores is None else tensor_to_json(scores)}
    )


def restore_selection_state(
    payload: dict[str, Any], records: RunRecords, context: ResumeContext, *, scores: bool
) -> RunRecords:
    r"""``records`` with the stored choice, checked: an index in ``[0, T]`` whose release the ledger
    records (``"select"``), and its ``T + 1`` scores exactly when the rule releases scores (``scores``)."""
    entry = payload_entries(payload, {"selected_index": None, "selection_scores": None}, "selection")
    T, selected, stored = context.steps, entry["selected_index"], entry["selection_scores"]
    made = is_int(selected) and 0 <= selected <= T and SELECTION_KEY in context.recorded
    if selected is not None and not made:
        raise ValueError(
            f"Checkpoint field 'strategies.selection.selected_index' must be None or an index in [0, {T}] of a "
            f"recorded selection, got {selected!r}."
        )
    if (stored is not None) != (selected is not None and scores):
        raise ValueError(
            "Checkpoint field 'strategies.selection.selection_scores' must be given exactly for a made selection "
            f"of a rule that releases scores ({'it does' if scores else 'it does not'})."
        )
    name = "strategies.selection.selection_scores"
    decoded = None if stored is None else tensor_from_json(stored, name, (T + 1,))
    return replace(records, selected=selected, selection_scores=decoded)
