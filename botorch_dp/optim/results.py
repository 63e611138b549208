r"""What a DP-GIBO run returns: the private release, its guarantee and opt-in diagnostics.

``PrivateRelease`` (with its ``PrivacyGuarantee``) and ``IterationInfo`` are public;
``NonPrivateDiagnostics`` are computed from the sensitive losses and must not be published.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from botorch_dp.optim.deprecated import alias_property
from botorch_dp.optim.release_json import release_json
from botorch_dp.optim.released_values import as_table, charges_of, finish, release_rows
from botorch_dp.privacy.ledger import Record
from botorch_dp.privacy.mechanisms import ReleaseDiagnostics
from botorch_dp.privacy.statement import NO_GUARANTEE, GuaranteeStatement


@dataclass
class PrivacyGuarantee:
    r"""The validation-data guarantee of a run.

    Attributes:
        mu: Total GDP parameter spent so far (``inf``: no guarantee; NaN when the ledger's
            validation side also holds a release known only by its RDP curve, e.g. DP-HyPO).
        epsilon: ``ε`` at ``delta`` for ``mu``-GDP (exact conversion; with NaN ``mu``, the
            ledger's RDP conversion, ``ledger.validation.epsilon``).
        delta: The ``δ`` used.
        noise_std: Standard deviation of the noise per coordinate, ``2B√T/(nμ)``.
        noise_multiplier: ``noise_std`` over the sensitivity ``2B/n`` (Opacus's convention).
        num_steps: Number of noisy releases so far.
        holds: ``False`` when the run used the unsafe opt-out (then ``mu = inf``).
        cautions: Warnings the guarantee carries: settings refused by default that the run was
            opted into (``δ ≥ 1/n``, a noise-dominated budget; ``optim.public_checks``).

    With ``noise_schedule="adaptive_norm"`` the noise differs per step: ``noise_std`` and
    ``noise_multiplier`` are those of the most recent gradient release (every step's
    ``σ_t`` and ``μ_t`` are in ``PrivateRelease.records["noise"]``, ``noise_stds`` and ``step_mus``).
    """

    mu: float
    epsilon: float
    delta: float
    noise_std: float
    noise_multiplier: float
    num_steps: int
    holds: bool = True
    cautions: tuple[str, ...] = ()

    @property
    def rho(self) -> float:
        r"""``ρ = μ²/2``: the same guarantee in zCDP units (exact for Gaussian releases;
        for a pure ``ε``-DP selection it reports the ledger's GDP charge ``μ_sel``)."""
        return self.mu * self.mu / 2.0


#: ``PrivateRelease``'s one-option fields before issue 42, each now ``records[family].attribute``;
#: the old names are deprecated read-only properties, and ``to_json`` still writes them as keys.
MOVED_FIELDS: dict[str, tuple[str, str]] = {
    "step_mus": ("noise", "step_mus"),
    "noise_stds": ("noise", "noise_stds"),
    "noisy_norms": ("noise", "noisy_norms"),
    "norm_mus": ("noise", "norm_mus"),
    "selection_scores": ("selection", "scores"),
    "subspace_bases": ("projection", "bases"),
    "subspace_dims": ("projection", "dims"),
    "released_coordinates": ("projection", "coordinates"),
    "released_preconditioners": ("step_rule", "preconditioners"),
    "preconditioner_mus": ("step_rule", "mus"),
    "preconditioner_noise_stds": ("step_rule", "noise_stds"),
    "clip_bounds": ("clip", "bounds"),
    "clip_counts": ("clip", "counts"),
}


def _moved(name: str) -> property:
    r"""The deprecated read-only property of the former field ``name`` (``MOVED_FIELDS``)."""
    family, attribute = MOVED_FIELDS[name]
    new = f"PrivateRelease.records[{family!r}].{attribute}"
    return alias_property(f"PrivateRelease.{name}", new, lambda release: release.field_value(name))


@dataclass
class PrivateRelease:
    r"""Everything a DP-GIBO run may publish.

    Attributes:
        theta: ``d`` tensor, the final iterate ``θ_T`` (``iterates[selected_index]``).
        iterates: ``(t + 1) x d`` tensor ``θ_0, ..., θ_t``.
        evaluation_points: ``N x d`` tensor, the points ``D_t`` (chosen from public data).
        batch_sizes: Points added at each iteration.
        posterior_traces: ``tr Σ_{D_t}(θ_t)`` after each batch (depends on ``D``, ``θ`` only).
        released_gradients: ``t x d`` tensor of the privatized gradients (in θ's coordinates).
        guarantee: The ``PrivacyGuarantee``.
        records: Each strategy's public record of the run, by family, as its ``record(...)`` makes
            it (``NoiseState``, ``ClipState``, ``ProjectionRecord``, ``PreconditionerRecord``,
            ``SelectionRecord``); a new option brings its own record here.

    The former fields (``noisy_norms``, ``clip_bounds``, … ``MOVED_FIELDS``) still read, as
    deprecated properties that warn and name their place in ``records``.
    """

    theta: Tensor
    iterates: Tensor
    evaluation_points: Tensor
    batch_sizes: list[int]
    posterior_traces: list[float]
    released_gradients: Tensor
    guarantee: PrivacyGuarantee
    records: dict[str, Any] = field(default_factory=dict)

    def recorded(self, family: str, name: str, default: Any = ()) -> Any:
        r"""``records[family].name``, or ``default`` when the family or its record has no such value."""
        return getattr(self.records.get(family), name, default)

    @property
    def selected_index(self) -> int | None:
        r"""``j`` with ``theta = iterates[j]``: ``t`` for ``"last"``, the argmin of the noisy norms,
        or the private choice of ``"exponential"``/``"noisy_loss"`` (``None`` while that choice is
        still to be made; ``theta`` is then ``θ_t``). The selection's record holds it."""
        return self.recorded("selection", "index", None)

    def field_value(self, name: str) -> Any:
        r"""The value of ``name`` in the flat layout (a field, or a former field of ``MOVED_FIELDS``
        as it was: a list, ``selection_scores`` a tensor or ``None``), without a warning."""
        if name not in MOVED_FIELDS:
            return getattr(self, name)
        value = self.recorded(*MOVED_FIELDS[name], None)
        if name == "selection_scores":
            return value
        return [] if value is None else list(value)


for _name in MOVED_FIELDS:  # the former one-option fields, deprecated and read-only
    setattr(PrivateRelease, _name, _moved(_name))


@dataclass
class NonPrivateDiagnostics:
    r"""NON-PRIVATE values computed from the sensitive losses. Never publish these.

    Attributes:
        unnoised_gradients: ``t x d`` clipped-mean gradients before noise.
        clip_fractions: Fraction of users clipped at each step.
        noise_norms: ``‖noise‖`` at each step.
    """

    unnoised_gradients: Tensor
    clip_fractions: list[float]
    noise_norms: list[float]
    NON_PRIVATE: bool = field(default=True, init=False)

    @classmethod
    def from_releases(cls, diagnostics: list[ReleaseDiagnostics], dim: int) -> NonPrivateDiagnostics:
        r"""Stack the per-release diagnostics of ``t`` steps (``dim``: ``d``, for ``t = 0``)."""
        unnoised = (
            torch.stack([x.unnoised_gradient for x in diagnostics])
            if diagnostics
            else torch.empty(0, dim, dtype=torch.float64)
        )
        return cls(
            unnoised_gradients=unnoised,
            clip_fractions=[x.clip_fraction for x in diagnostics],
            noise_norms=[x.noise_norm for x in diagnostics],
        )

    def bias_norms(self, iterates: Tensor, true_gradient: Callable[[Tensor], Tensor]) -> Tensor:
        r"""``‖ḡ_t − ∇f(θ_t)‖`` for each of the ``t`` steps over the release's ``iterates``, given
        ``true_gradient`` (``k x d`` → ``k x d``; NON-PRIVATE)."""
        t = self.unnoised_gradients.shape[0]
        return (self.unnoised_gradients - true_gradient(iterates[:t])).norm(dim=-1)


@dataclass(repr=False)
class DPGIBOResult:
    r"""Result of a run: ``release`` is private; ``diagnostics`` is not (``None`` unless asked).

    ``statement`` is what the run's ledger protected when the result was made (validation users,
    training records, and both composed; ``privacy.statement``): ``guarantee_report()`` says it
    in words and ``to_json()`` writes it with the release. ``records`` are the run's own validation
    records in the ledger (public: keys and charges), which ``released_values()`` reads.
    """

    release: PrivateRelease
    diagnostics: NonPrivateDiagnostics | None = None
    statement: GuaranteeStatement | None = None
    records: tuple[Record, ...] | None = None

    def released_values(self, *, as_frame: bool | None = None) -> Any:
        r"""One row per released quantity (``optim.released_values``): the iterates, each step's noisy
        gradient (and norm, clip count, preconditioner), a private selection's release and the
        returned ``θ``, each with its ``mu`` (this release's Gaussian-DP charge), ``epsilon`` (of what
        the value depends on), ``delta`` and ``protected`` (the sets its guarantee covers). Nothing
        un-noised: the NON-PRIVATE diagnostics are never read. The charges are the run's ledger
        ``records``; without them, the ``μ`` the release holds (``None`` where it holds none).
        ``as_frame``: ``True`` a pandas ``DataFrame``, ``False`` a list of dicts, ``None`` (default)
        a ``DataFrame`` when pandas is installed."""
        delta = self.release.guarantee.delta
        charges = None if self.records is None else charges_of(self.records)
        rows = release_rows(self.release, delta=delta, charges=charges)
        return as_table(finish(rows, delta, self.statement), as_frame)

    def guarantee_report(self) -> str:
        r"""What was protected, in plain words: per protected set the ``(ε, δ)`` and how it was
        reached, and the composed guarantee if the same people are in both sets; then the
        guarantee's ``cautions`` (settings refused by default that the run was opted into)."""
        g = self.release.guarantee
        if self.statement is None:
            if not g.holds or not math.isfinite(g.epsilon):
                text = f"What was protected:\n- validation users: {NO_GUARANTEE} (epsilon = inf)"
            else:
                text = f"What was protected:\n- validation users: (epsilon = {g.epsilon:.4g}, delta = {g.delta:.3g})-DP"
        else:
            text = str(self.statement)
        return text + "".join(f"\nWARNING: {caution}" for caution in g.cautions)

    def to_json(
        self, path: str | os.PathLike | None = None, *, space: Any = None, include_diagnostics: bool = False
    ) -> str:
        r"""The release and its guarantee as JSON text (no noise seed), written to ``path`` too if given.
        With a ``tuning.SearchSpace`` (``space``) ``theta`` and the iterates are also given in natural
        units; ``include_diagnostics`` adds the NON-PRIVATE diagnostics (labelled; never publish)."""
        return release_json(self, path, space=space, include_diagnostics=include_diagnostics)

    def __repr__(self) -> str:
        r = self.release
        g = r.guarantee
        said = (
            f"validation (epsilon = {g.epsilon:.4g}, delta = {g.delta:.3g})"
            if g.holds and math.isfinite(g.epsilon)
            else NO_GUARANTEE
        )
        return (
            f"DPGIBOResult(theta of d = {r.theta.shape[-1]}, {len(r.batch_sizes)} steps, "
            f"{r.evaluation_points.shape[0]} "
            f"evaluations, {said}"
            f"{', NON-PRIVATE diagnostics' if self.diagnostics is not None else ''})"
        )

    __str__ = __repr__


@dataclass
class IterationInfo:
    r"""Public summary of one finished iteration (what ``run`` passes to its callback).

    Attributes:
        iteration: ``t``, the number of steps taken so far.
        theta: ``d`` tensor, the new iterate ``θ_t`` (a copy).
        batch_size: Points evaluated in this iteration.
        posterior_trace: ``tr Σ_{D_t}(θ_{t-1})`` after this batch (NaN for a selection).
        selected_index: ``None`` after a step; after the selection batch of
            ``"exponential"``/``"noisy_loss"``, the chosen iterate's index (``theta`` is it).
    """

    iteration: int
    theta: Tensor
    batch_size: int
    posterior_trace: float
    selected_index: int | None = None
