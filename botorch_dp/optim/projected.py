r"""What a projected DP-GIBO step releases and what the run records of it (Kairouz et al.).

``projected_release`` releases ``ũ = (1/n) Σ_i clip_B(Ṽᵀ A y_i) + N(0, σ² I_k)`` through a
gradient mechanism and lifts it to θ-space (the loop itself does the same through its
strategies, ``optim.options.projection``); ``SubspaceTrack`` is the run's public record of the
bases, the released coordinates and the private preconditioner's releases (and its
SENSITIVE clean columns), with its exact checkpoint encoding. The oracles that give the
bases are in ``optim.subspace``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.subspace import check_basis
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, GradientRelease, NonfiniteLosses

if TYPE_CHECKING:
    from botorch_dp.privacy.ledger import Meter

__all__ = ["ProjectedRelease", "SubspaceTrack", "lift", "projected_release"]


@dataclass
class ProjectedRelease:
    r"""A gradient released in ``k`` coordinates, and its image in θ-space.

    Attributes:
        release: The ``GradientRelease`` in θ-space: ``gradient = Ṽ ũ`` (``d``), the cost of
            the ``k``-dimensional release, and (only if requested) NON-PRIVATE diagnostics
            with ``unnoised_gradient = Ṽ ū``.
        coordinates: ``ũ = ū + N(0, σ² I_k)``, the ``k`` released coordinates (public).
        unnoised_coordinates: SENSITIVE ``ū`` (``k``), only when ``keep_unnoised``: the
            private preconditioner's input, never to be published.
    """

    release: GradientRelease
    coordinates: Tensor
    unnoised_coordinates: Tensor | None = None


def projected_release(
    mechanism: GaussianGradientMechanism,
    basis: Tensor,
    A: Tensor,
    Y: Tensor | Sequence[Tensor],
    *,
    diagnostics: bool = False,
    nonfinite: NonfiniteLosses = "refuse",
    keep_unnoised: bool = False,
    meter: Meter | None = None,
) -> ProjectedRelease:
    r"""Release ``ũ = (1/n) Σ_i clip_B(Ṽᵀ A y_i) + N(0, σ² I_k)`` through ``mechanism``.

    The public ``k x N`` matrix ``Ṽᵀ A`` takes the place of ``A`` in
    ``GaussianGradientMechanism.release``: it is projected before clipping, so each user's
    clipped ``û_i`` has norm at most ``B``, the sensitivity is ``2B/n`` and the release is
    ``μ/√T``-GDP exactly as without a subspace; only ``k`` noise coordinates are drawn.

    Args:
        mechanism: The gradient mechanism (its ``B``, ``n``, ``μ``, ``T``, generator).
        basis: The public ``d x k`` basis ``Ṽ``.
        A: The public ``d x N`` gradient weights ``∇k(θ, D) K⁻¹``.
        Y: The SENSITIVE ``N x n`` losses (or their row blocks).
        diagnostics: Also return NON-PRIVATE diagnostics (in θ-space).
        nonfinite: See ``clipped_mean_gradient``.
        keep_unnoised: Also return the SENSITIVE ``ū`` (for the private preconditioner).
        meter: The charged step's meter (the release is recorded as ``"grad"``).

    Returns:
        The ``ProjectedRelease``.
    """
    if basis.dim() != 2 or basis.shape[0] != A.shape[0]:
        raise ValueError(f"The basis must be d x k with d = {A.shape[0]}, got shape {tuple(basis.shape)}.")
    A_k = basis.transpose(0, 1) @ A  # Ṽᵀ A, k x N, public
    release = mechanism.release(A_k, Y, diagnostics=diagnostics or keep_unnoised, nonfinite=nonfinite, meter=meter)
    info = release.diagnostics
    unnoised = None if info is None or not keep_unnoised else info.unnoised_gradient
    if not diagnostics:
        release = replace(release, diagnostics=None)
    return ProjectedRelease(release=lift(release, basis), coordinates=release.gradient, unnoised_coordinates=unnoised)


def lift(release: GradientRelease, basis: Tensor) -> GradientRelease:
    r"""A ``k``-coordinate release in θ-space: ``Ṽ ũ``, and ``Ṽ ū`` in its diagnostics."""
    info = release.diagnostics
    if info is not None:
        info = replace(info, unnoised_gradient=basis @ info.unnoised_gradient)
    return GradientRelease(gradient=basis @ release.gradient, cost=release.cost, diagnostics=info)


# ----------------------------------------------------------------------- a run's record
@dataclass(frozen=True)
class SubspaceTrack:
    r"""What Kairouz et al.'s options add to a DP-GIBO run's state, one entry per step.

    Immutable: the loop replaces it at each step (so a failed ``tell`` restores it).

    Attributes:
        bases: ``Ṽ_t`` (``d x k``, public) of each step; empty without a subspace.
        coordinates: ``ũ_t`` (``k``; ``d`` without a subspace), the released coordinates;
            empty unless a subspace or the private preconditioner is on.
        preconditioners: The released ``Ĝ_t`` (``k x k``, public); private preconditioner only.
        preconditioner_noise_stds: ``σ_B(t)`` of those releases (public).
        columns: SENSITIVE clean ``ū_t`` (``k``), the private preconditioner's input
            ``X_t = [ū_1 … ū_t]``; kept only in the run and its (protected) checkpoint.
    """

    bases: tuple[Tensor, ...] = ()
    coordinates: tuple[Tensor, ...] = ()
    preconditioners: tuple[Tensor, ...] = ()
    preconditioner_noise_stds: tuple[float, ...] = ()
    columns: tuple[Tensor, ...] = ()

    def to_json(self) -> dict[str, Any]:
        r"""Exact JSON (floats as ``float.hex``) for the checkpoint (SENSITIVE: ``columns``)."""
        return {
            "bases": [ckpt.tensor_to_json(V) for V in self.bases],
            "coordinates": [ckpt.tensor_to_json(u) for u in self.coordinates],
            "preconditioners": [ckpt.tensor_to_json(G) for G in self.preconditioners],
            "preconditioner_noise_stds": [float(x).hex() for x in self.preconditioner_noise_stds],
            "columns": [ckpt.tensor_to_json(u) for u in self.columns],
        }

    @classmethod
    def from_json(cls, value: Any, *, dim: int, steps: int, has_subspace: bool, private: bool) -> SubspaceTrack:
        r"""Decode and check ``to_json``'s output for a run with ``steps`` steps taken.

        Raises:
            ValueError: Naming the first field that is wrong (counts, shapes, finiteness,
                orthonormal bases, symmetric preconditioners).
        """
        name = "subspace"
        ckpt.check_keys(
            value, {"bases", "coordinates", "preconditioners", "preconditioner_noise_stds", "columns"}, name
        )
        expected = {
            "bases": steps if has_subspace else 0,
            "coordinates": steps if has_subspace or private else 0,
            "preconditioners": steps if private else 0,
            "preconditioner_noise_stds": steps if private else 0,
            "columns": steps if private else 0,
        }
        for key, count in expected.items():
            if not isinstance(value[key], list) or len(value[key]) != count:
                raise ValueError(f"Checkpoint field '{name}.{key}' must hold {count} entries.")
        bases = tuple(check_basis(ckpt.tensor_from_json(v, f"{name}.bases", (dim, None)), dim) for v in value["bases"])
        ks = [V.shape[1] for V in bases] if has_subspace else [dim] * expected["coordinates"]
        coordinates = tuple(
            ckpt.tensor_from_json(v, f"{name}.coordinates", (k,)) for v, k in zip(value["coordinates"], ks, strict=True)
        )
        k = ks[0] if ks else dim
        preconditioners = tuple(
            ckpt.tensor_from_json(v, f"{name}.preconditioners", (k, k)) for v in value["preconditioners"]
        )
        if any(not torch.equal(G, G.transpose(0, 1)) for G in preconditioners):
            raise ValueError(f"Checkpoint field '{name}.preconditioners' must hold symmetric matrices.")
        stds = tuple(
            ckpt.float_from_json(v, f"{name}.preconditioner_noise_stds") for v in value["preconditioner_noise_stds"]
        )
        if any(x < 0 for x in stds):
            raise ValueError(f"Checkpoint field '{name}.preconditioner_noise_stds' must be non-negative.")
        columns = tuple(ckpt.tensor_from_json(v, f"{name}.columns", (k,)) for v in value["columns"])
        if private and has_subspace and any(not torch.equal(V, bases[0]) for V in bases):
            raise ValueError(f"Checkpoint field '{name}.bases': the private preconditioner needs one fixed basis.")
        return cls(bases, coordinates, preconditioners, stds, columns)
