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

from botorch_dp.optim.release_json import release_json
from botorch_dp.optim.released_values import as_table, charges_of, finish, release_rows
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import Record
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, ReleaseDiagnostics
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
    ``σ_t`` and ``μ_t`` are in ``PrivateRelease.noise_stds`` and ``step_mus``).
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

    @classmethod
    def of(
        cls,
        *,
        mu: float,
        delta: float,
        mechanism: GaussianGradientMechanism,
        released: bool,
        num_steps: int,
        holds: bool,
    ) -> PrivacyGuarantee:
        r"""The guarantee of ``mu``-GDP at ``delta``, with the noise read from ``mechanism``
        (``noise_std`` is 0 until something was ``released``)."""
        return cls(
            mu=mu,
            epsilon=gdp_epsilon(mu, delta),
            delta=delta,
            noise_std=mechanism.noise_std if released else 0.0,
            noise_multiplier=mechanism.noise_multiplier,
            num_steps=num_steps,
            holds=holds,
        )


@dataclass
class PrivateRelease:
    r"""Everything a DP-GIBO run may publish.

    Attributes:
        theta: ``d`` tensor, the final iterate ``θ_T``.
        iterates: ``(t + 1) x d`` tensor ``θ_0, ..., θ_t``.
        evaluation_points: ``N x d`` tensor, the points ``D_t`` (chosen from public data).
        batch_sizes: Points added at each iteration.
        posterior_traces: ``tr Σ_{D_t}(θ_t)`` after each batch (depends on ``D``, ``θ`` only).
        released_gradients: ``t x d`` tensor of the privatized gradients.
        guarantee: The ``PrivacyGuarantee``.
        step_mus: ``μ_t`` of each gradient release (the realised ``Δ/σ_t``).
        noise_stds: ``σ_t``, the noise std per coordinate of each gradient release.
        noisy_norms: The released noisy gradient norms ``N_t`` (``"adaptive_norm"`` only;
            ``N_t`` is at ``θ_t``; empty otherwise).
        norm_mus: ``μ_N`` of each norm release (empty without ``"adaptive_norm"``).
        selected_index: ``j`` with ``theta = iterates[j]``: ``t`` for ``"last"``, the argmin
            of ``noisy_norms``, or the private choice of ``"exponential"``/``"noisy_loss"``
            (``None`` while that choice is still to be made; ``theta`` is then ``θ_t``).
        selection_scores: The released noisy mean losses of the iterates (``"noisy_loss"``),
            else ``None``.
        subspace_bases: With a ``subspace`` (Kairouz et al.): the public ``d x k`` basis
            ``Ṽ_t`` of each step; else empty. ``released_gradients`` are then ``Ṽ_t ũ_t``.
        released_coordinates: With a ``subspace`` or the private preconditioner: the released
            ``k`` coordinates ``ũ_t`` of each step; else empty.
        released_preconditioners: With ``preconditioner="private"``: the released ``k x k``
            ``Ĝ_t`` of each step; else empty.
        preconditioner_mus: ``μ_H/√T``, the GDP parameter of each preconditioner release
            (empty without the private preconditioner).
        preconditioner_noise_stds: ``σ_B(t)`` of each preconditioner release (GOE scale).
        clip_bounds: With ``clip_bound="adaptive"``: ``B_0, …, B_t`` (``B_j`` clipped step
            ``j``; ``B_t`` is the next step's), public; else empty.
        clip_counts: With ``clip_bound="adaptive"``: the released noisy counts ``b̃_j`` of
            users with ``‖A y_i‖ ≤ B_j``; else empty.
    """

    theta: Tensor
    iterates: Tensor
    evaluation_points: Tensor
    batch_sizes: list[int]
    posterior_traces: list[float]
    released_gradients: Tensor
    guarantee: PrivacyGuarantee
    step_mus: list[float] = field(default_factory=list)
    noise_stds: list[float] = field(default_factory=list)
    noisy_norms: list[float] = field(default_factory=list)
    norm_mus: list[float] = field(default_factory=list)
    selected_index: int | None = None
    selection_scores: Tensor | None = None
    subspace_bases: list[Tensor] = field(default_factory=list)
    released_coordinates: list[Tensor] = field(default_factory=list)
    released_preconditioners: list[Tensor] = field(default_factory=list)
    preconditioner_mus: list[float] = field(default_factory=list)
    preconditioner_noise_stds: list[float] = field(default_factory=list)
    clip_bounds: list[float] = field(default_factory=list)
    clip_counts: list[float] = field(default_factory=list)

    @property
    def subspace_dims(self) -> list[int]:
        r"""``k`` of each step's subspace (empty without a subspace)."""
        return [V.shape[1] for V in self.subspace_bases]


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
        r"""``‖ḡ_t − ∇f(θ_t)‖`` for each step, given the true gradient (NON-PRIVATE).

        Args:
            iterates: The ``(t + 1) x d`` iterates of the release.
            true_gradient: Maps a ``k x d`` tensor to ``k x d`` gradients of ``f``.

        Returns:
            A ``t`` tensor.
        """
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
        un-noised: the NON-PRIVATE diagnostics are never read.

        Args:
            as_frame: ``None``: a pandas ``DataFrame`` when pandas is installed (optional), else a
                list of dicts; ``True``: a ``DataFrame`` (``ImportError`` without pandas); ``False``:
                the list of dicts.

        Returns:
            The table. The charges are the run's ledger records (``records``); a result without
            them reads the ``μ`` the release holds, and leaves ``None`` where it holds none.
        """
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
        r"""The release and its guarantee as JSON (written to ``path`` too, if given).

        Args:
            path: Optionally a file to write (owner-only permissions are the caller's choice).
            space: A ``tuning.SearchSpace``: ``theta`` and the iterates are then also given in
                natural units, by hyperparameter name.
            include_diagnostics: Add the NON-PRIVATE diagnostics (labelled as such; never
                publish them). Off by default.

        Returns:
            The JSON text. No noise seed is in it (a run never stores one).
        """
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
