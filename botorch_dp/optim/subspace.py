r"""Public subspaces for DP-GIBO's projected gradient release (Kairouz et al., spec A2 and A4).

A subspace oracle returns an orthonormal ``d x k`` basis ``Ṽ`` (``k ≤ d``) computed from
public information only. The projected release clips and noises the per-user gradient
estimates in ``k`` coordinates, ``u_i = Ṽᵀ A y_i``, instead of ``d``, so the noise energy
per step is ``kσ²`` instead of ``dσ²``; the step is taken in θ-space along ``Ṽ ũ``.

Oracles: ``FixedSubspace(V)`` (the user's basis), ``PublicGradientPCA`` (public proxy data),
``PreviousRunsPCA`` (earlier runs' releases) and ``PosteriorGradientCovarianceSubspace(k)`` (free).

Privacy does not depend on the basis: the projection happens before clipping, so each
``û_i`` has norm at most ``B`` whatever ``Ṽ`` is, the replace-one sensitivity of the mean
stays ``2B/n`` and the noise std stays ``2B√T/(nμ)``. What the basis must not do is depend
on the sensitive users: a basis computed from them (other than from released values) is a
release of its own that this library does not account for. That is the caller's
responsibility for ``FixedSubspace``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import Tensor

from botorch_dp.privacy.checks import check_positive_int, check_probability

if TYPE_CHECKING:
    from gpytorch.kernels import Kernel

    from botorch_dp.gradient_gp import GradientGP

__all__ = [
    "FixedSubspace",
    "PosteriorGradientCovarianceSubspace",
    "PreviousRunsPCA",
    "PublicGradientPCA",
    "SubspaceOracle",
    "check_basis",
    "orthonormal_basis",
    "subspace_from_spec",
    "top_eigenvectors",
]

#: Largest ``max |ṼᵀṼ − I|`` accepted from an oracle.
ORTHONORMALITY_TOLERANCE = 1e-8
#: Relative size of the smallest diagonal entry of ``R`` (of ``V = QR``) below which the
#: columns of ``V`` count as linearly dependent.
RANK_TOLERANCE = 1e-10


def orthonormal_basis(V: Any, name: str = "V", dim: int | None = None) -> Tensor:
    r"""A ``d x k`` float64 ``Q`` with ``QᵀQ = I`` spanning the columns of ``V`` (a ``d x k`` tensor or
    array, a ``d`` vector being one direction; ``dim``: the required ``d``), by a reduced QR
    decomposition with the signs fixed so that ``R`` has a positive diagonal: the basis is a
    function of ``V`` alone, and ``I`` comes back exactly."""
    try:
        V = torch.as_tensor(V).detach().to(dtype=torch.float64, copy=True)  # on V's device
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a d x k tensor, got {type(V).__name__}.") from err
    if V.dim() == 1:
        V = V.unsqueeze(-1)
    if V.dim() != 2 or V.shape[0] < 1 or V.shape[1] < 1:
        raise ValueError(f"{name} must be a d x k tensor with k >= 1, got shape {tuple(V.shape)}.")
    d, k = V.shape
    if dim is not None and d != dim:
        raise ValueError(f"{name} must have d = {dim} rows, got {d}.")
    if k > d:
        raise ValueError(f"{name} has k = {k} columns, more than d = {d}: a subspace has k <= d.")
    if not torch.isfinite(V).all():
        raise ValueError(f"{name} must be finite (no NaN or inf).")
    Q, R = torch.linalg.qr(V, mode="reduced")
    diag = R.diagonal()
    if not bool((diag.abs() > RANK_TOLERANCE * max(float(V.abs().max()), 1e-300)).all()):
        raise ValueError(f"The columns of {name} are linearly dependent (or zero): no k = {k} dimensional subspace.")
    signs = 1.0 - 2.0 * (diag < 0).to(Q)  # ±1 in Q's dtype (torch.where of Python floats gave float32)
    return Q * signs


def check_basis(V: Any, dim: int, name: str = "subspace basis") -> Tensor:
    r"""An oracle's output checked to be an orthonormal ``dim x k`` tensor, as float64 on its device
    (not re-orthonormalised, so its bits are kept)."""
    if not isinstance(V, Tensor):
        raise ValueError(f"The {name} must be a tensor, got {type(V).__name__}.")
    V = V.detach().to(dtype=torch.float64)
    if V.dim() != 2 or V.shape[0] != dim or not 1 <= V.shape[1] <= dim:
        raise ValueError(f"The {name} must be d x k with d = {dim} and 1 <= k <= d, got shape {tuple(V.shape)}.")
    if not torch.isfinite(V).all():
        raise ValueError(f"The {name} is not finite.")
    gram = V.transpose(0, 1) @ V
    error = float((gram - torch.eye(V.shape[1], dtype=V.dtype, device=V.device)).abs().max())
    if not error <= ORTHONORMALITY_TOLERANCE:
        raise ValueError(f"The {name} is not orthonormal (max |VᵀV − I| = {error:.3g}); orthonormalise it with QR.")
    return V


def top_eigenvectors(
    C: Tensor, *, k: int | None = None, energy: float | None = None, name: str = "matrix"
) -> tuple[Tensor, Tensor]:
    r"""The ``d x k`` orthonormal basis of the leading eigenvectors of a symmetric PSD ``C``
    (symmetrised here; signs as in ``orthonormal_basis``) and all its eigenvalues, decreasing:
    ``k`` directions, or the fewest whose eigenvalues capture ``energy`` of the trace."""
    C = C.to(torch.float64)
    if C.dim() != 2 or C.shape[0] != C.shape[1] or not torch.isfinite(C).all():
        raise ValueError(f"The {name} must be a finite square matrix.")
    d = C.shape[0]
    eigenvalues, vectors = torch.linalg.eigh((C + C.transpose(0, 1)) / 2)
    eigenvalues, vectors = eigenvalues.flip(0), vectors.flip(1)  # decreasing
    if k is None:
        if energy is None:
            raise ValueError(f"top_eigenvectors of the {name} needs k or energy, got k=None and energy=None.")
        total = float(eigenvalues.clamp_min(0.0).sum())
        if not total > 0.0:
            raise ValueError(f"The {name} is zero: it defines no direction.")
        captured = eigenvalues.clamp_min(0.0).cumsum(0) / total
        k = int((captured < energy * (1.0 - 1e-12)).sum()) + 1
    if not 1 <= k <= d:
        raise ValueError(f"k must lie in [1, d = {d}], got {k}.")
    return orthonormal_basis(vectors[:, :k], name=f"top eigenvectors of the {name}"), eigenvalues


def _check_k_energy(k: int | None, energy: float | None) -> tuple[int | None, float | None]:
    if k is not None and energy is not None:
        raise ValueError("Give either k or energy, not both.")
    if k is not None:
        return check_positive_int(k, "k"), None
    return None, check_probability(0.9 if energy is None else energy, "energy", allow_one=True)


class SubspaceOracle(abc.ABC):
    r"""Where the public basis ``Ṽ_t`` of step ``t`` comes from.

    ``oracle(theta, gp)`` returns an orthonormal ``d x k`` float64 tensor. It may use the
    iterate ``θ_t`` and the ``GradientGP`` on the points evaluated before step ``t``'s batch
    (both public), never the losses. ``fixed`` says whether every call returns the same
    basis (the private preconditioner needs one). ``spec()`` describes the oracle exactly,
    as JSON-able values and tensors, so that a checkpoint can refuse a changed one.
    """

    #: Whether every call returns the same basis.
    fixed: bool = True

    @abc.abstractmethod
    def __call__(self, theta: Tensor, gp: GradientGP) -> Tensor:
        r"""The ``d x k`` basis for iterate ``theta`` (``d``) given ``gp`` (public)."""

    @abc.abstractmethod
    def spec(self) -> dict[str, Any]:
        r"""An exact description (``{"kind": ..., ...}``) of this oracle."""


class FixedSubspace(SubspaceOracle):
    r"""A fixed basis given by the user, orthonormalised with QR.

    Example: on an SVM tuning task whose last 25 length-scales belong to noise features, the
    5 informative length-scales plus ``(ε, C, γ)`` as coordinate directions, or all noise
    length-scales moved together as one direction.

    The basis must come from public information (a domain expert, a public data set): it
    is used as given and costs nothing in the accounting.
    """

    fixed = True

    def __init__(self, V: Any) -> None:
        self.basis = orthonormal_basis(V, "V")

    @classmethod
    def from_basis(cls, basis: Tensor) -> FixedSubspace:
        r"""A ``FixedSubspace`` holding an already orthonormal ``basis`` bit for bit (no QR),
        e.g. one read back from a checkpoint; ``check_basis`` refuses anything else."""
        oracle = cls.__new__(cls)
        oracle.basis = check_basis(basis, basis.shape[0] if isinstance(basis, Tensor) else 0, "basis").clone()
        return oracle

    @property
    def dim(self) -> int:
        return self.basis.shape[0]

    @property
    def k(self) -> int:
        return self.basis.shape[1]

    def __call__(self, theta: Tensor, gp: GradientGP | None = None) -> Tensor:
        if theta.shape[-1] != self.dim:
            raise ValueError(f"The subspace has d = {self.dim} rows, but θ has {theta.shape[-1]} entries.")
        return self.basis.to(theta.device, copy=True)  # kept on the CPU, used on θ's device

    def spec(self) -> dict[str, Any]:
        return {"kind": "fixed", "basis": self.basis.clone()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(d={self.dim}, k={self.k})"


class PublicGradientPCA(FixedSubspace):
    r"""The active subspace of the tuning task on PUBLIC proxy data.

    With gradients ``ĝ_1..ĝ_m`` of the same task on public data (opt-in users, synthetic
    data, a public data set of the task, a differently seeded draw of a benchmark), the
    basis is the top eigenvectors of ``C = (1/m) Σ_j ĝ_j ĝ_jᵀ``. Build it from gradients,
    or with ``from_objective`` from a public objective evaluated at public points.

    Args:
        gradients: An ``m x d`` tensor of public gradients.
        k: Number of directions; or
        energy: the smallest ``k`` capturing this fraction of ``tr C`` (default 0.9).

    Attributes:
        basis: The ``d x k`` basis.
        eigenvalues: The ``d`` eigenvalues of ``C``, decreasing.
    """

    def __init__(self, gradients: Tensor, *, k: int | None = None, energy: float | None = None) -> None:
        k, energy = _check_k_energy(k, energy)
        G = _float_matrix(gradients, "gradients")
        C = G.transpose(0, 1) @ G / G.shape[0]
        self.basis, self.eigenvalues = top_eigenvectors(C, k=k, energy=energy, name="public gradient covariance")

    @classmethod
    def from_objective(
        cls,
        objective: Callable[[Tensor], Tensor],
        points: Tensor,
        *,
        k: int | None = None,
        energy: float | None = None,
        step: float = 1e-4,
        kernel: Kernel | None = None,
        noise_variance: float = 0.0,
    ) -> PublicGradientPCA:
        r"""The PCA of gradients of a PUBLIC ``objective`` (``q x d`` → ``q`` losses or ``q x n`` per-user
        losses, averaged) at public ``points``: central differences of step ``step`` (``2dm``
        evaluations in one call), or with a ``kernel`` the posterior means of a GP with that fixed
        kernel and ``noise_variance`` on the ``m`` values."""
        X = _float_matrix(points, "points")
        m, d = X.shape
        if kernel is None:
            h = float(step)
            if not h > 0.0:
                raise ValueError(f"step must be positive, got {step!r}.")
            offsets = h * torch.eye(d, dtype=torch.float64)
            probes = torch.cat([X[:, None, :] + offsets, X[:, None, :] - offsets], dim=1).reshape(2 * m * d, d)
            values = _mean_losses(objective(probes), 2 * m * d).reshape(m, 2, d)
            gradients = (values[:, 0] - values[:, 1]) / (2.0 * h)
        else:
            from botorch_dp.gradient_gp import GradientGP

            values = _mean_losses(objective(X), m)
            gp = GradientGP(X, kernel, noise_variance, train_Y=values)
            with torch.no_grad():
                gradients = gp.posterior(X).mean
        return cls(gradients, k=k, energy=energy)


class PreviousRunsPCA(FixedSubspace):
    r"""The PCA of the public outputs of earlier runs.

    Released gradients of earlier DP-GIBO runs (on other data sets, or earlier DP runs whose
    releases are public) are public; so are their iterates. The basis is the top
    eigenvectors of ``(1/m) Σ_j g_j g_jᵀ`` over the stacked rows.

    ``released``: an ``m x d`` tensor, or a sequence of them or of ``PrivateRelease`` /
    ``DPGIBOResult`` objects, whose rows are the released gradients or, with
    ``use="iterate_differences"``, ``θ_{t+1} − θ_t``. ``k``, ``energy``: as in ``PublicGradientPCA``.
    """

    def __init__(
        self,
        released: Tensor | Sequence[Any],
        *,
        use: Literal["gradients", "iterate_differences"] = "gradients",
        k: int | None = None,
        energy: float | None = None,
    ) -> None:
        if not isinstance(use, str) or use not in _RELEASED_ROWS:
            raise ValueError(f"use must be 'gradients' or 'iterate_differences', got {use!r}.")
        k, energy = _check_k_energy(k, energy)
        items = [released] if isinstance(released, Tensor) else list(released)
        if not items:
            raise ValueError("released must hold at least one run's outputs.")
        rows = []
        for item in items:
            item = getattr(item, "release", item)  # a DPGIBOResult
            rows.append(_float_matrix(item, "released") if isinstance(item, Tensor) else _RELEASED_ROWS[use](item))
        if len({r.shape[1] for r in rows}) != 1:
            raise ValueError("The released runs have different dimensions d.")
        G = torch.cat(rows)
        if G.shape[0] == 0:
            raise ValueError("The released runs hold no gradients.")
        C = G.transpose(0, 1) @ G / G.shape[0]
        self.basis, self.eigenvalues = top_eigenvectors(C, k=k, energy=energy, name="released gradient covariance")


class PosteriorGradientCovarianceSubspace(SubspaceOracle):
    r"""The top-``k`` eigenvectors of the GP's posterior gradient covariance ``Σ_D(θ_t)``.

    ``Σ_D(θ) = ∇k∇ᵀ(θ, θ) − ∇k(θ, D) K⁻¹ k(D, θ)∇ᵀ`` is where the gradient is still
    uncertain given the points evaluated so far: at the start the prior's most variable
    directions (for an ARD kernel, the shortest length-scales), later the directions the
    evaluations have not pinned down. It needs no extra data, and it is FREE: it is a
    function of the kernel (fixed, chosen without the losses), of ``D`` (chosen by the
    public acquisition from earlier releases) and of ``θ_t`` (computed from earlier
    releases), never of the losses ``y``, so using it is post-processing.

    The basis changes from step to step (``fixed = False``), so it cannot be combined with
    the private preconditioner. Ties between eigenvalues are broken by ``torch.linalg.eigh``.
    """

    fixed = False

    def __init__(self, k: int) -> None:
        self.k = check_positive_int(k, "k")

    def __call__(self, theta: Tensor, gp: GradientGP) -> Tensor:
        if self.k > gp.dim:
            raise ValueError(f"k = {self.k} exceeds d = {gp.dim}.")
        with torch.no_grad():
            covariance = gp.posterior_covariance(theta.detach().to(torch.float64).reshape(-1))
        basis, _ = top_eigenvectors(covariance, k=self.k, name="posterior gradient covariance")
        return basis

    def spec(self) -> dict[str, Any]:
        return {"kind": "posterior_gradient_covariance", "k": self.k}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k})"


def subspace_from_spec(spec: Any) -> SubspaceOracle:
    r"""Rebuild a built-in oracle from its ``spec()`` (the allow-list a checkpoint may name); an unknown
    or malformed spec (a user-defined oracle: pass the config) is a ``ValueError``."""
    kind = spec.get("kind") if isinstance(spec, dict) else None
    keys, build = _FROM_SPEC.get(kind, (None, None)) if isinstance(kind, str) else (None, None)
    if build is None or set(spec) != keys:
        raise ValueError(f"Unknown subspace oracle spec {spec!r:.80}; pass the config to resume.")
    return build(spec)


#: The built-in oracles a checkpoint may name, by their spec's ``kind``: the spec's keys and how to build one.
_FROM_SPEC: dict[str, tuple[set[str], Callable[[dict[str, Any]], SubspaceOracle]]] = {
    "fixed": ({"kind", "basis"}, lambda spec: FixedSubspace.from_basis(spec["basis"])),
    "posterior_gradient_covariance": ({"kind", "k"}, lambda spec: PosteriorGradientCovarianceSubspace(spec["k"])),
}
#: ``PreviousRunsPCA``'s ``use``: the rows it takes of a released run (a ``PrivateRelease``).
_RELEASED_ROWS: dict[str, Callable[[Any], Tensor]] = {
    "gradients": lambda release: _float_matrix(release.released_gradients, "released gradients"),
    "iterate_differences": lambda release: _float_matrix(release.iterates, "iterates").diff(dim=0),
}


def _float_matrix(value: Any, name: str) -> Tensor:
    try:
        X = torch.as_tensor(value).detach().to(dtype=torch.float64, device="cpu")
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be an m x d tensor, got {type(value).__name__}.") from err
    if X.dim() != 2 or X.shape[1] < 1:
        raise ValueError(f"{name} must be an m x d tensor, got shape {tuple(X.shape)}.")
    if not torch.isfinite(X).all():
        raise ValueError(f"{name} must be finite.")
    return X


def _mean_losses(values: Tensor, q: int) -> Tensor:
    values = torch.as_tensor(values).detach().to(torch.float64)
    if values.dim() == 2 and values.shape[0] == q:
        values = values.mean(-1)
    if values.shape != (q,) or not torch.isfinite(values).all():
        raise ValueError(
            f"The public objective must return {q} finite losses (or {q} x n), got shape {tuple(values.shape)}."
        )
    return values
