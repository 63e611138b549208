r"""Privacy of objective perturbation (ObjPert) and approximate minima perturbation (AMP).

Pure functions on floats (Redberg, Koskela & Wang, "Improving the Privacy and Practicality
of Objective Perturbation for Differentially Private Linear Learners"): RDP curves,
privacy profiles and their ε(δ), the classic bound of Kifer et al. (2012) for comparison,
and the authors' calibration of (σ, λ).

ObjPert releases the exact minimiser of ``Σ_z ℓ(θ; z) + (λ/2)‖θ‖² + bᵀθ``,
``b ~ N(0, σ² I)``, for a convex GLM loss with ``‖∇ℓ‖ ≤ L`` (``clip``) and ``∇²ℓ ≼ βI``
(``beta``), ``λ > β``. AMP releases an approximate minimiser ``θ̃`` with
``‖∇L^P(θ̃)‖ ≤ τ`` plus output noise; it is ObjPert followed by a Gaussian
mechanism of sensitivity ``2τ/λ``. The paper adds ``N(0, σ_out² I)``; this package rounds
``θ̃`` to a public power-of-two grid and adds an exact discrete Gaussian of scale at least
``σ_out`` (``output_grid``), whose rounded sensitivity is at most ``2τ/λ + 2⁻¹⁴ σ_out``.
Notation: ``c = −log(1 − β/λ) > 0``, ``s = L/σ``, the output part's charged
``s_g = (2τ/(λ σ_out) + 2⁻¹⁴)(1 + 2⁻²⁷)`` (the paper's ``2τ/(λ σ_out)`` enlarged by the grid;
the discrete Gaussian's RDP and its dominating μ are at most ``s_g``, see ``output_grid``),
``ε* = c + s²/2``, and the Gaussian privacy profile

    δ_G(x; s) = Φ(−x/s + s/2) − e^x Φ(−x/s − s/2)   (any real x).

All bounds are for add/remove neighbours (one training record added or removed); do not
use them for replace-one. The privacy loss random variable that dominates ObjPert is
``ω = c + s²/2 + s|Z|``, ``Z ~ N(0, 1)`` (the paper's Lemma D.6), so

- RDP (Thm. 3.2): ``ε_OP(α) = c + α s²/2 + log(2Φ((α − 1)s))/(α − 1)``;
- AMP RDP (Thm. 4.1): ``ε_AMP(α) = ε_OP(α) + α s_g²/2``;
- profile (Appendix D.2, not the main-text Theorem 3.1, which is wrong):
  ``δ(ε) = E[(1 − e^{ε − ω})₊] = 2 δ_G(ε − c; s)`` for ``ε ≥ ε*`` and
  ``1 − 2 e^{ε − c} Φ(−s)`` below;
- AMP profile (the PLRVs add): ``δ_AMP(ε) = 2 ∫₀^∞ φ(z) δ_G(ε − ε* − s z; s_g) dz``.

The package, one module per part:

- ``rdp_curves``: the RDP curves (``objpert_rdp``, ``amp_rdp``) and their ε on a grid of orders;
- ``profiles``: the privacy profiles and their inverses (``objpert_delta``, ``amp_delta``,
  ``objpert_epsilon``, ``amp_epsilon``), the Gaussian lower bound and Kifer et al.'s bound;
- ``calibration``: ``calibrate_amp``, the authors' choice of (σ, λ);
- ``output_grid``: the grid and discrete Gaussian of AMP's released output (``amp_output_noise``);
- ``_params``: the shared argument checks.

Every public name is re-exported here.
"""

from botorch_dp.privacy.analysis.objective_perturbation.calibration import calibrate_amp
from botorch_dp.privacy.analysis.objective_perturbation.output_grid import (
    AMP_GRID_SHARE,
    AMP_MAX_DIM,
    amp_output_grid,
    amp_output_mu,
    amp_output_noise,
)
from botorch_dp.privacy.analysis.objective_perturbation.profiles import (
    amp_delta,
    amp_epsilon,
    gaussian_profile_delta,
    kifer_delta,
    objpert_delta,
    objpert_epsilon,
)
from botorch_dp.privacy.analysis.objective_perturbation.rdp_curves import (
    AMPParameters,
    amp_rdp,
    amp_rdp_epsilon,
    objpert_rdp,
    objpert_rdp_epsilon,
)

__all__ = [
    "AMP_GRID_SHARE",
    "AMP_MAX_DIM",
    "AMPParameters",
    "amp_delta",
    "amp_epsilon",
    "amp_output_grid",
    "amp_output_mu",
    "amp_output_noise",
    "amp_rdp",
    "amp_rdp_epsilon",
    "calibrate_amp",
    "gaussian_profile_delta",
    "kifer_delta",
    "objpert_delta",
    "objpert_epsilon",
    "objpert_rdp",
    "objpert_rdp_epsilon",
]
