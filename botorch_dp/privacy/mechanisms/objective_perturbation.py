r"""Objective perturbation (AMP with gradient clipping, Redberg, Koskela & Wang): the two noise
draws of a training-side release with a Rényi-DP curve."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.objective_perturbation import amp_output_noise, amp_rdp
from botorch_dp.privacy.checks import check_greater, check_nonnegative, check_positive, check_positive_int
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS
from botorch_dp.privacy.ledger.meter import TrainingMeter
from botorch_dp.privacy.mechanisms import _noise
from botorch_dp.privacy.mechanisms.releases import RDPCost


class AMPNotConvergedError(RuntimeError):
    r"""AMP refused to release: ``‖∇L^P(θ̃)‖₂ ≤ τ`` was not verified. Nothing was released.

    The refusal itself says that the solver did not reach the tolerance on this data set
    (one bit about the data); it carries no number computed from the data.
    """


@dataclass
class ObjectivePerturbationRelease:
    r"""AMP's released model and its cost.

    Attributes:
        theta: The ``d`` released parameters ``γ (round(θ̃/γ) + k)``, ``k ~ N_Z(0, s²)^d`` (public;
            every entry an integer multiple of the public grid ``γ``, see ``amp_output_noise``).
        cost: Its ``RDPCost`` (``amp_rdp`` of the mechanism's parameters).
    """

    theta: Tensor
    cost: RDPCost


class ObjectivePerturbationMechanism:
    r"""The two noise draws of AMP with gradient clipping (Redberg, Koskela & Wang, Alg. 1).

    1. ``perturbation()``: ``b ~ N(0, σ² I_d)``, the linear term ``bᵀθ`` of the perturbed
       objective ``L^P(θ) = Σ_z ℓ_C(θ; z) + (λ/2)‖θ‖² + bᵀθ`` (drawn once).
    2. ``release(θ̃, gradient)``: checks ``‖∇L^P(θ̃)‖₂ ≤ τ`` with the caller's exact float64
       gradient and releases (once) ``θ̃`` rounded to the public grid ``γ`` plus an exact
       discrete Gaussian ``γ N_Z(0, s²)^d`` with ``γ s ≥ σ_out`` (``release_on_grid``, the
       grid and scale of ``amp_output_noise``: ``√d γ ≤ 2⁻¹⁴ σ_out``), or raises
       ``AMPNotConvergedError`` and releases nothing.

    For a GLM loss with per-example gradient norm at most ``C``, smoothness ``β < λ`` and
    add/remove neighbours, the release is ``ε(α)``-RDP with ``ε = amp_rdp(α, clip=C,
    beta=β, lam=λ, sigma=σ, tau=τ, sigma_out=σ_out)`` (Thm. 4.1): ObjPert's curve plus the
    output part at the rounded sensitivity ``2τ/λ + √d γ``, charged as
    ``(2τ/(λ σ_out) + 2⁻¹⁴)(1 + 2⁻²⁷)``. ObjPert's part assumes ``b`` has a Gaussian density; ``b``
    is a float64 draw (``docs/security.md`` says what that does and does not cover). Redrawing
    ``b`` is a new mechanism, hence the draw-once rule.

    Args:
        dim: ``d``, the number of parameters (bias included), at most ``AMP_MAX_DIM = 2¹⁸``.
        clip: ``C``, the bound on every per-example gradient norm.
        beta: ``β``, the smoothness of the per-example loss in ``θ``.
        lam: ``λ > β``, the ridge coefficient of the sum objective.
        sigma: ``σ``, the std of ``b``.
        tau: ``τ``, the gradient-norm tolerance of the released minimiser.
        sigma_out: ``σ_out``, the output noise's scale (the discrete Gaussian's ``γ s``, at least ``σ_out``
            and below ``σ_out (1 + 2⁻¹⁴)``).
        generator: Source of both draws; ``None`` (default): OS entropy. A seeded
            generator makes the noise reproducible (the caller warns, see ``seeding``).
        secure_rng: Draw from OS entropy even if a ``generator`` is given.
    """

    def __init__(
        self,
        *,
        dim: int,
        clip: float,
        beta: float,
        lam: float,
        sigma: float,
        tau: float,
        sigma_out: float,
        generator: torch.Generator | None = None,
        secure_rng: bool = False,
    ) -> None:
        self.dim = check_positive_int(dim, "dim (d)")
        self.clip = check_positive(clip, "clip (C)", allow_inf=False)
        self.beta = check_nonnegative(beta, "beta (β)", allow_inf=False)
        self.lam = check_greater(lam, "lam (λ, must exceed β)", self.beta)
        self.sigma = check_positive(sigma, "sigma (σ)", allow_inf=False)
        self.tau = check_positive(tau, "tau (τ)", allow_inf=False)
        self.sigma_out = check_positive(sigma_out, "sigma_out (σ_out)", allow_inf=False)
        #: The public grid ``γ`` and integer scale ``s`` of the released output (``amp_output_noise``).
        self.output_noise = amp_output_noise(dim=self.dim, lam=self.lam, tau=self.tau, sigma_out=self.sigma_out)
        self.generator = generator
        self.secure_rng = secure_rng
        self._perturbation_drawn = False
        self._released = False

    @property
    def cost(self) -> RDPCost:
        r"""The ``RDPCost`` of one release (``amp_rdp`` at this mechanism's parameters)."""
        params = {
            "clip": self.clip,
            "beta": self.beta,
            "lam": self.lam,
            "sigma": self.sigma,
            "tau": self.tau,
            "sigma_out": self.sigma_out,
        }
        description = "AMP objective perturbation (add/remove one record): " + ", ".join(
            f"{k}={v:.10g}" for k, v in params.items()
        )
        return RDPCost(rdp=functools.partial(amp_rdp, **params), description=description)

    def perturbation(self, *, meter: TrainingMeter | None = None, run_id: object = None) -> Tensor:
        r"""The ``d`` float64 tensor ``b ~ N(0, σ² I_d)``, drawn once per mechanism.

        SENSITIVE: with ``b`` known, ``θ̃`` reveals the data's gradient; it never leaves
        the training routine (except as flagged non-private diagnostics).

        Args:
            meter: The training charge's meter: the whole mechanism (both draws) is recorded
                as training run ``run_id`` just before ``b`` is drawn.
            run_id: The run's id in the meter's bound.
        """
        if self._perturbation_drawn:
            raise RuntimeError("The perturbation b was already drawn; a new b needs a new mechanism (and budget).")
        if meter is not None:
            from botorch_dp.privacy.ledger.events import TrainingMechanism

            cost = self.cost
            meter.record(run_id, TrainingMechanism(cost.description, tuple(cost.rdp(a) for a in TRAINING_RDP_ORDERS)))
        self._perturbation_drawn = True
        return _noise._gaussian(
            self.dim,
            self.sigma,
            self.generator,
            self.secure_rng,
            torch.float64,
            None,
            release_mu=self.clip / self.sigma,
        )

    def release(self, theta_tilde: Tensor, gradient: Callable[[Tensor], Tensor]) -> ObjectivePerturbationRelease:
        r"""Verify ``‖∇L^P(θ̃)‖₂ ≤ τ``, then release ``γ (round(θ̃/γ) + k)``, ``k ~ N_Z(0, s²)^d``.

        Args:
            theta_tilde: The ``d`` approximate minimiser ``θ̃`` (sensitive).
            gradient: ``θ ↦ ∇L^P(θ)``, the exact float64 full gradient of the perturbed
                objective built with this mechanism's ``b`` (a ``d`` tensor).

        Returns:
            An ``ObjectivePerturbationRelease`` (float64 CPU ``theta``).

        Raises:
            AMPNotConvergedError: The gradient at ``θ̃`` is not finite or exceeds ``τ``.
        """
        if not self._perturbation_drawn:
            raise RuntimeError("Draw the perturbation b (perturbation()) before releasing.")
        if self._released:
            raise RuntimeError("This mechanism already released its model.")
        theta_tilde = theta_tilde.detach().to(dtype=torch.float64, device="cpu").reshape(-1)
        if theta_tilde.shape[0] != self.dim or not torch.isfinite(theta_tilde).all():
            raise AMPNotConvergedError("θ̃ is not a finite d-vector; nothing was released.")
        grad = gradient(theta_tilde.clone()).detach().to(dtype=torch.float64, device="cpu").reshape(-1)
        if grad.shape[0] != self.dim or not bool(torch.linalg.vector_norm(grad) <= self.tau):
            raise AMPNotConvergedError(
                "The gradient-norm condition ‖∇L^P(θ̃)‖₂ ≤ τ does not hold at θ̃; nothing was released."
            )
        self._released = True
        # on the public grid, exactly (issue 40): a function of the integers round(θ̃/γ) + k alone; the cost
        # (amp_rdp) charges the rounded sensitivity 2τ/λ + √d γ ≤ 2τ/λ + 2^-14 σ_out
        theta = _noise.release_on_grid(
            theta_tilde, self.output_noise, generator=self.generator, secure_rng=self.secure_rng
        )
        return ObjectivePerturbationRelease(theta=theta, cost=self.cost)
