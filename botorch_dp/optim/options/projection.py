r"""Projections of the per-user estimates on a public subspace (Kairouz et al.; ``optim.subspace``).

``NoProjection`` releases ``d`` coordinates. ``Projected(oracle, acquisition=False)`` asks a
``SubspaceOracle`` (fixed basis, public-gradient PCA, previous runs' PCA, posterior gradient
covariance) for each step's public ``d x k`` basis ``Ṽ_t``, projects the estimates before
clipping (the users' sum is taken at ``W = Ṽ_tᵀ A``: same sensitivity ``2B/n``, ``k`` noised
coordinates) and lifts the release back, ``Ṽ_t ũ_t``; with ``acquisition`` the batches are
chosen for the projected gradient too (spec A5). The bases and released coordinates are
public and recorded in the run's ``SubspaceTrack``. ``Projection`` is the family's protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.optim.projected import SubspaceTrack, lift
from botorch_dp.optim.subspace import SubspaceOracle, check_basis, subspace_from_spec
from botorch_dp.privacy.mechanisms import GradientRelease

__all__ = ["NoProjection", "Projected", "Projection", "ProjectionRecord"]


class Projection(StrategyLike, Protocol):
    r"""A projection of the per-user estimates on a public basis ``Ṽ_t`` (``d x k``): the step's
    basis (``None``: all ``d`` coordinates), the acquisition's, the batch size it suggests, how
    many coordinates a step noises, and the lift of a release back to ``θ``'s coordinates. The
    basis is computed from public values only (``θ_t``, the GP before the step's batch, the
    track); its records go in the run's ``SubspaceTrack``."""

    def basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        r"""``Ṽ_t`` of the step at ``θ_t`` (``d x k``), or ``None``."""
        ...

    def acquisition_basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        r"""The basis the batch search projects on, or ``None``."""
        ...

    def default_batch_size(self, dim: int) -> int:
        r"""The batch size a fixed batch rule without ``size`` uses."""
        ...

    def released_dim(self, dim: int) -> int:
        r"""How many coordinates a step noises."""
        ...

    def check(self, dim: int) -> None:
        r"""Refuse a projection that cannot run in ``d`` dimensions (``ValueError``)."""
        ...

    def lift(
        self, release: GradientRelease, basis: Tensor | None, track: SubspaceTrack, record: bool
    ) -> tuple[GradientRelease, SubspaceTrack]:
        r"""The release in ``θ``'s coordinates and the track after it (``record``: keep the
        released coordinates, which the step rule asks for)."""
        ...

    def record(self, track: SubspaceTrack) -> ProjectionRecord:
        r"""What a release carries of the projection (``PrivateRelease.records["projection"]``)."""
        ...


@dataclass(frozen=True)
class ProjectionRecord:
    r"""What a release carries of the projection (``PrivateRelease.records["projection"]``), public.

    Attributes:
        bases: The ``d x k`` basis ``Ṽ_t`` of each step (empty without a subspace); the released
            gradients are then ``Ṽ_t ũ_t``.
        coordinates: The released coordinates ``ũ_t`` of each step (``k`` of them; ``d`` without a
            subspace), kept with a subspace or when the step rule keeps them (the private
            preconditioner); else empty.
    """

    bases: tuple[Tensor, ...] = ()
    coordinates: tuple[Tensor, ...] = ()

    @property
    def dims(self) -> tuple[int, ...]:
        r"""``k`` of each step's subspace (empty without a subspace)."""
        return tuple(V.shape[1] for V in self.bases)


@register("projection", "none")
@dataclass(frozen=True)
class NoProjection(Strategy):
    r"""Release every coordinate (``Ṽ_t = I``)."""

    can_provide = frozenset({"fixed_basis"})

    def basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        return None

    def acquisition_basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        return None

    def default_batch_size(self, dim: int) -> int:
        r"""``d + 1`` points pin down ``d`` directions."""
        return dim + 1

    def released_dim(self, dim: int) -> int:
        r"""How many coordinates a step noises (``d``)."""
        return dim

    def check(self, dim: int) -> None:
        r"""Nothing to check."""

    def lift(
        self, release: GradientRelease, basis: Tensor | None, track: SubspaceTrack, record: bool
    ) -> tuple[GradientRelease, SubspaceTrack]:
        r"""The release as it is; its ``d`` coordinates recorded when ``record`` (another option,
        the private preconditioner, keeps them)."""
        if not record:
            return release, track
        return release, replace(track, coordinates=(*track.coordinates, release.gradient))

    def record(self, track: SubspaceTrack) -> ProjectionRecord:
        r"""The released coordinates the track keeps (no basis: ``Ṽ_t = I``)."""
        return ProjectionRecord(coordinates=track.coordinates)


@register("projection", "subspace")
@dataclass(frozen=True)
class Projected(Strategy):
    r"""Project on ``oracle``'s public basis ``Ṽ_t`` each step.

    Args:
        oracle: A ``SubspaceOracle``; its basis must not be computed from the sensitive users.
        acquisition: Choose batches for the projected gradient ``Ṽ_tᵀ∇f`` only, maximizing the
            reduction of ``tr(Ṽ_tᵀ Σ_D(θ) Ṽ_t)`` (``bias_tolerance`` applies to that trace).
    """

    oracle: SubspaceOracle
    acquisition: bool = False
    can_provide = frozenset({"fixed_basis"})

    def __post_init__(self) -> None:
        if not isinstance(self.oracle, SubspaceOracle):
            raise ValueError(f"subspace must be a SubspaceOracle (optim.subspace), got {type(self.oracle).__name__}.")
        if not isinstance(self.acquisition, bool):
            raise ValueError(f"subspace_acquisition must be True or False, got {self.acquisition!r}.")

    @property
    def provides(self) -> frozenset[str]:
        return self.can_provide if self.oracle.fixed else frozenset()

    @property
    def label(self) -> str:
        return f"subspace={type(self.oracle).__name__}"

    def spec(self) -> dict[str, Any]:
        return {"kind": self.name, "oracle": self.oracle.spec(), "acquisition": self.acquisition}

    @classmethod
    def from_spec(cls, spec: Any) -> Projected:
        return cls(subspace_from_spec(spec["oracle"]), bool(spec["acquisition"]))

    def check(self, dim: int) -> None:
        r"""The oracle's basis must have ``d`` rows and ``k ≤ d``."""
        basis = getattr(self.oracle, "basis", None)
        if isinstance(basis, Tensor) and basis.shape[0] != dim:
            raise ValueError(f"subspace: the basis has {basis.shape[0]} rows, but the bounds have d = {dim}.")
        k = getattr(self.oracle, "k", None)
        if isinstance(k, int) and k > dim:
            raise ValueError(f"subspace: k = {k} exceeds d = {dim}.")

    def basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor:
        r"""``Ṽ_t`` from the oracle (public: ``θ_t`` and the GP before this step's batch), checked;
        a run that keeps released preconditioners needs the first step's basis again."""
        d = theta.shape[-1]
        with torch.no_grad():
            basis = check_basis(self.oracle(theta.clone(), gp), d, f"basis from {type(self.oracle).__name__}")
        if track.columns and track.bases and not torch.equal(basis, track.bases[0]):
            raise ValueError(
                f"{type(self.oracle).__name__} returned a new basis; the private preconditioner needs a fixed one."
            )
        return basis

    def acquisition_basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        return self.basis(theta, gp, track) if self.acquisition else None

    def released_dim(self, dim: int) -> int:
        r"""How many coordinates a step noises: the oracle's ``k`` when it declares one, else ``d``."""
        k = getattr(self.oracle, "k", None)
        basis = getattr(self.oracle, "basis", None)
        k = basis.shape[1] if isinstance(basis, Tensor) and basis.dim() == 2 else k
        return min(k, dim) if isinstance(k, int) else dim

    def default_batch_size(self, dim: int) -> int:
        r"""``k + 1`` with the projected acquisition and an integer ``k`` (spec A5), else ``d + 1``."""
        k = getattr(self.oracle, "k", None) if self.acquisition else None
        return min(k, dim) + 1 if isinstance(k, int) else dim + 1

    def lift(
        self, release: GradientRelease, basis: Tensor | None, track: SubspaceTrack, record: bool
    ) -> tuple[GradientRelease, SubspaceTrack]:
        r"""``Ṽ_t ũ_t`` (and ``Ṽ_t ū_t`` in the diagnostics), with ``Ṽ_t`` and ``ũ_t`` recorded."""
        if basis is None:  # the step's basis(), which is never None for a projected run
            raise ValueError(f"{self.label} lifts a release from its basis Ṽ_t, got basis=None.")
        track = replace(track, bases=(*track.bases, basis), coordinates=(*track.coordinates, release.gradient))
        return lift(release, basis), track

    def record(self, track: SubspaceTrack) -> ProjectionRecord:
        r"""Each step's public basis and released coordinates (never the track's SENSITIVE columns)."""
        return ProjectionRecord(track.bases, track.coordinates)
