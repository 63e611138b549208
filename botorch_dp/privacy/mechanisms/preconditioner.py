r"""The private full-matrix AdaGrad preconditioner ``G_t = (X_t X_tᵀ)^{1/2}`` released with GOE
noise (Kairouz et al., spec A3, errata E2.1–E2.4)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.gdp import gaussian_noise_std_for_mu
from botorch_dp.privacy.checks import check_positive, check_positive_int
from botorch_dp.privacy.ledger.events import Gaussian
from botorch_dp.privacy.ledger.meter import Meter
from botorch_dp.privacy.mechanisms import _noise
from botorch_dp.privacy.mechanisms.releases import PrivacyCost


def gram_sqrt(X: Tensor) -> Tensor:
    r"""``G = (X Xᵀ)^{1/2} = |Xᵀ|`` of a ``k x t`` matrix, from its thin SVD ``X = U S Wᵀ``.

    ``G = U S Uᵀ``, symmetrised. The SVD route is exact where an eigendecomposition of the
    near-singular ``X Xᵀ`` is not (spec E2.1: ``eigh``-based roots gave spurious
    sensitivity ratios above ``√2``).

    Args:
        X: A ``k x t`` tensor (``t ≥ 0``).

    Returns:
        The symmetric PSD ``k x k`` tensor ``G``.
    """
    if X.shape[-1] == 0:
        return X.new_zeros(X.shape[-2], X.shape[-2])
    U, S, _ = torch.linalg.svd(X, full_matrices=False)
    G = (U * S.unsqueeze(-2)) @ U.transpose(-1, -2)
    return (G + G.transpose(-1, -2)) / 2


def sample_goe(
    k: int,
    *,
    generator: torch.Generator | None = None,
    secure_rng: bool = False,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
) -> Tensor:
    r"""One ``k x k`` draw ``M ~ GOE_k``: symmetric, diagonal ``N(0, 2)``, off-diagonal ``N(0, 1)``.

    Its density is ``∝ exp(−‖M‖_F²/4)``: an isotropic Gaussian with variance 2 along every
    Frobenius-unit direction of the symmetric matrices (spec E2.3), so ``E‖M‖_F² = k(k+1)``
    and ``‖M‖_op ≈ 2√k`` for large ``k``.
    """
    return _noise.draw_goe(check_positive_int(k, "k"), 1.0, generator, secure_rng, dtype, device)


@dataclass
class PreconditionerRelease:
    r"""One released preconditioner ``Ĝ_t = G_t + σ_B(t) M`` and its cost.

    Attributes:
        matrix: The symmetric ``k x k`` release (public; may be indefinite).
        cost: Its ``PrivacyCost`` (``μ_H/√T``-GDP).
        noise_std: ``σ_B(t)`` (public; sets the eigenvalue floor ``2√k σ_B(t)``).
    """

    matrix: Tensor
    cost: PrivacyCost
    noise_std: float


class GOEPreconditionerMechanism:
    r"""Release full-matrix AdaGrad's preconditioner ``G_t = (X_t X_tᵀ)^{1/2}`` with GOE noise.

    ``X_t = [ū_1 … ū_t]`` (``k x t``) holds the clean clipped-mean gradients of the first
    ``t`` steps (in a fixed basis), each with replace-one sensitivity ``Δ = 2B/n``. Then
    ``‖X_t − X_t′‖_F ≤ √t Δ`` and, by the Araki–Yamagami inequality
    ``‖|A| − |B|‖_F ≤ √2 ‖A − B‖_F``, ``‖G_t − G_t′‖_F ≤ √(2t) Δ`` (spec E2.1; the seed
    paper's ``L√t/n`` is too small by ``√2``, which the rank-one example attains). GOE noise
    ``σ_B M`` is isotropic with std ``√2 σ_B`` in the Frobenius geometry of symmetric
    matrices (E2.3), so the release is ``(√t Δ/σ_B)``-GDP; with
    ``σ_B(t) = √(tT) Δ/μ_H`` every one of the ``T`` releases costs ``μ_H/√T`` and all of
    them ``μ_H``.

    Args:
        sensitivity: ``Δ``, the replace-one L2 sensitivity of each column (``2B/n``).
        privacy_mu: ``μ_H``, the GDP budget of all ``T`` releases (``inf``: no noise).
        num_steps: ``T``.
        generator: Source of the noise (``None``: OS entropy).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
    """

    def __init__(
        self,
        *,
        sensitivity: float,
        privacy_mu: float,
        num_steps: int,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
    ) -> None:
        self.sensitivity = check_positive(sensitivity, "sensitivity (Δ)", allow_inf=False)
        self.privacy_mu = check_positive(privacy_mu, "privacy_mu (μ_H)")
        self.num_steps = check_positive_int(num_steps, "num_steps (T)")
        self.generator = generator
        self.secure_rng = secure_rng

    def frobenius_sensitivity(self, t: int) -> float:
        r"""``√(2t) Δ``, the Frobenius sensitivity of ``G_t`` (E2.1)."""
        return math.sqrt(2.0 * t) * self.sensitivity

    def noise_std(self, t: int) -> float:
        r"""``σ_B(t) = √(tT) Δ/μ_H`` (0 when ``μ_H = inf``)."""
        return gaussian_noise_std_for_mu(math.sqrt(t) * self.sensitivity, self.privacy_mu, self.num_steps)

    @property
    def step_mu(self) -> float:
        r"""GDP parameter ``μ_H/√T`` of one release."""
        return self.privacy_mu / math.sqrt(self.num_steps)

    def release(self, columns: Tensor, *, meter: Meter | None = None, part: str = "precond") -> PreconditionerRelease:
        r"""Release ``G_t + σ_B(t) M`` for the SENSITIVE ``k x t`` matrix of clean columns.

        Args:
            columns: ``X_t = [ū_1 … ū_t]``, ``k x t`` with ``1 ≤ t ≤ T``, finite; each column
                a clipped mean of sensitivity ``Δ`` (the caller's contract).
            meter: The charged step's meter (``Gaussian(μ_H/√T)`` recorded as ``part`` before the draw).
            part: The release's part of its step.

        Returns:
            The ``PreconditionerRelease``.
        """
        if not isinstance(columns, Tensor) or columns.dim() != 2 or columns.shape[0] < 1:
            raise ValueError("columns must be a k x t tensor with k >= 1.")
        k, t = columns.shape
        if not 1 <= t <= self.num_steps:
            raise ValueError(f"columns must have 1 <= t <= T = {self.num_steps} columns, got {t}.")
        if not torch.isfinite(columns).all():
            raise ValueError("The preconditioner's columns are not finite; nothing was released.")
        G = gram_sqrt(columns.detach())
        std = self.noise_std(t)
        _noise.record_charge(meter, part, Gaussian(self.step_mu))
        # GOE noise σ_B M is σ_B-isotropic in w = (G_ii/√2, G_ij), where ‖w − w′‖ ≤ ‖G − G′‖_F/√2 ≤ √t Δ
        matrix, _ = _noise.release_goe(
            G,
            sensitivity=math.sqrt(t) * self.sensitivity,
            mu=self.step_mu,
            generator=self.generator,
            secure_rng=self.secure_rng,
        )
        return PreconditionerRelease(matrix=matrix.detach(), cost=PrivacyCost(mu=self.step_mu), noise_std=std)
