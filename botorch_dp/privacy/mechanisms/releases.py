r"""What a release returns: its public value's container and its cost (``PrivacyCost``,
``PureDPCost``, ``RDPCost``), and the NON-PRIVATE diagnostics returned only on request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu


@dataclass(frozen=True)
class PrivacyCost:
    r"""What a release spent, as returned by every mechanism of this module.

    Attributes:
        mu: GDP parameter of each release (``math.inf``: no guarantee, no noise).
        count: Number of releases of that ``mu`` the call made (e.g. one score per trial).
    """

    mu: float
    count: int = 1


@dataclass(frozen=True)
class PureDPCost:
    r"""What a pure ``ε``-DP release (an exponential mechanism) spent.

    Record it with ``ledger.external.record(PureDP(epsilon), ...)``; the ledger
    charges it as ``mu = 2Φ⁻¹(e^ε/(1 + e^ε))``-GDP (``analysis.gdp.pure_dp_to_gdp_mu``).

    Attributes:
        epsilon: The pure-DP parameter ``ε > 0``.
    """

    epsilon: float

    @property
    def mu(self) -> float:
        r"""The GDP charge ``2Φ⁻¹(e^ε/(1 + e^ε))`` of this release."""
        return pure_dp_to_gdp_mu(self.epsilon)


@dataclass(frozen=True)
class RDPCost:
    r"""What a training-side release spent, as a Rényi-DP curve (add/remove one record).

    The release is ``(α, rdp(α))``-RDP for every order ``α > 1``; record it with
    ``ledger.external.record(TrainingMechanism.from_rdp(cost.description, cost.rdp), run_id=...)``
    and convert with ``privacy.analysis.rdp`` (``rdp_curve_epsilon`` on ``DEFAULT_RDP_ORDERS``).

    Attributes:
        rdp: ``α ↦ ε(α)``, a pure function of public parameters.
        description: What was released, with its parameters (no data-dependent values).
    """

    rdp: Callable[[float], float]
    description: str


@dataclass(frozen=True)
class ReleaseDiagnostics:
    r"""NON-PRIVATE values of one gradient release. Never publish these.

    Attributes:
        unnoised_gradient: The ``d`` clipped mean before noise.
        clip_fraction: Fraction of users whose estimate was clipped.
        noise_norm: ``‖noise‖``.
    """

    unnoised_gradient: Tensor
    clip_fraction: float
    noise_norm: float


@dataclass
class GradientRelease:
    r"""One privatized gradient, its cost and, only if requested, non-private diagnostics.

    Attributes:
        gradient: The ``d`` released gradient ``ḡ + noise`` (public).
        cost: The ``PrivacyCost`` of this release (``μ/√T``-GDP).
        diagnostics: ``None`` unless requested; then NON-PRIVATE ``ReleaseDiagnostics``.
    """

    gradient: Tensor
    cost: PrivacyCost
    diagnostics: ReleaseDiagnostics | None = None


@dataclass
class NormRelease:
    r"""One released noisy norm ``N = ‖ḡ‖ + N(0, σ²)`` (public; may be negative).

    Attributes:
        norm: The released value ``N``.
        cost: Its ``PrivacyCost`` (``μ = Δ/σ``, ``Δ = 2B/n``).
        noise_std: ``σ``.
    """

    norm: float
    cost: PrivacyCost
    noise_std: float
