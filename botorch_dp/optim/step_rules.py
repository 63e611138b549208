r"""Projected steps on released gradients: ``θ ← Π_Θ(θ − η · rule(g))`` via ``torch.optim``.

The iterate ``θ`` is the one parameter of a ``torch.optim.SGD``, ``torch.optim.Adagrad`` or
``FullMatrixAdagrad``; each step hands it a released (already privatized) gradient, lets
the optimizer update, then projects onto the box ``Θ`` once. Steps are post-processing of
the releases, so any optimizer is private; its ``state_dict`` (AdaGrad's sums) goes into
the checkpoint. ``FullMatrixAdagrad`` (Kairouz et al., spec A3) preconditions with a matrix built
from the released gradients (free) or with a separately released preconditioner.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, get_args, overload

import torch
from torch import Tensor

from botorch_dp.privacy.checks import did_you_mean
from botorch_dp.utils import project_to_box

__all__ = [
    "ADAGRAD_EPS",
    "PRECONDITIONERS",
    "STEP_RULES",
    "FullMatrixAdagrad",
    "Preconditioner",
    "StepRule",
    "check_step_rule",
    "debiased_floor",
    "floored_solve",
    "make_step_optimizer",
    "preconditioner_floor",
    "projected_step",
    "psd_sqrt",
]

StepRule = Literal["sgd", "adagrad", "adagrad_full"]
STEP_RULES: tuple[str, ...] = get_args(StepRule)

#: Preconditioners of ``step_rule="adagrad_full"``: ``"noisy"`` and ``"noisy_debiased"`` are
#: built from the released gradients (free); ``"private"`` is released on its own (costs μ_H).
Preconditioner = Literal["noisy", "noisy_debiased", "private"]
PRECONDITIONERS: tuple[str, ...] = get_args(Preconditioner)

#: ``eps`` added to AdaGrad's denominator ``√(Σ g²) + eps`` (the package's historical value;
#: ``torch.optim.Adagrad``'s own default is 1e-10).
ADAGRAD_EPS = 1e-8


def check_step_rule(step_rule: str) -> str:
    r"""Refuse an unknown step rule.

    Args:
        step_rule: One of ``"sgd"``, ``"adagrad"`` or ``"adagrad_full"``.

    Returns:
        ``step_rule``.
    """
    if step_rule not in STEP_RULES:
        raise ValueError(
            f"step_rule must be one of {STEP_RULES}, got {step_rule!r}.{did_you_mean(step_rule, STEP_RULES)}"
        )
    return step_rule


def make_step_optimizer(
    theta: Tensor, step_rule: StepRule, step_size: float, *, preconditioner: Preconditioner | None = None
) -> torch.optim.Optimizer:
    r"""A ``torch.optim`` optimizer over a copy of ``θ``.

    Args:
        theta: The ``d`` start ``θ_0``; the optimizer holds (and updates) its own copy.
        step_rule: ``"sgd"`` (``θ ← θ − η g``), ``"adagrad"``
            (``θ ← θ − η g / (√(Σ_{s≤t} g_s²) + eps)``, coordinate-wise; ``eps`` is
            ``ADAGRAD_EPS``) or ``"adagrad_full"`` (``FullMatrixAdagrad``).
        step_size: ``η > 0``.
        preconditioner: For ``"adagrad_full"``: ``"noisy"`` (default), ``"noisy_debiased"``
            or ``"private"``; must be ``None`` for the other rules.

    Returns:
        A ``torch.optim.SGD``, ``torch.optim.Adagrad`` or ``FullMatrixAdagrad`` with one
        parameter, ``θ``.
    """
    param = theta.detach().clone()
    rule = check_step_rule(step_rule)
    if preconditioner is not None and rule != "adagrad_full":
        raise ValueError(f"preconditioner is only used with step_rule='adagrad_full', got step_rule={rule!r}.")
    if rule == "adagrad_full":
        return FullMatrixAdagrad([param], lr=step_size, preconditioner=preconditioner or "noisy")
    if rule == "adagrad":
        return torch.optim.Adagrad([param], lr=step_size, eps=ADAGRAD_EPS)
    return torch.optim.SGD([param], lr=step_size)


def projected_step(optimizer: torch.optim.Optimizer, gradient: Tensor, bounds: Tensor, **step_kwargs: Any) -> Tensor:
    r"""One optimizer step on a released gradient, then the projection ``Π_Θ``.

    Args:
        optimizer: From ``make_step_optimizer``.
        gradient: The ``d`` released gradient ``g_t`` (public).
        bounds: The ``2 x d`` box ``Θ``.
        step_kwargs: Passed to ``optimizer.step`` (``FullMatrixAdagrad``'s public extras:
            the basis, the noise std, a released preconditioner).

    Returns:
        The new ``d`` iterate ``θ_{t+1}`` (a copy).
    """
    theta = optimizer.param_groups[0]["params"][0]
    theta.grad = gradient.detach().to(theta)
    optimizer.step(**step_kwargs)
    theta.grad = None
    with torch.no_grad():
        theta.copy_(project_to_box(theta, bounds))
    return theta.detach().clone()


# ------------------------------------------------------- full-matrix AdaGrad (Kairouz et al.)
def psd_sqrt(M: Tensor) -> Tensor:
    r"""``PSD(M)^{1/2}``: the square root of a symmetric matrix with its negative eigenvalues
    set to 0 (``M`` is symmetrised first).

    Args:
        M: A symmetric ``d x d`` tensor.

    Returns:
        The symmetric PSD ``d x d`` square root.
    """
    eigenvalues, Q = torch.linalg.eigh((M + M.transpose(-1, -2)) / 2)
    root = (Q * eigenvalues.clamp_min(0.0).sqrt().unsqueeze(-2)) @ Q.transpose(-1, -2)
    return (root + root.transpose(-1, -2)) / 2


def floored_solve(H: Tensor, u: Tensor, floor: float) -> Tensor:
    r"""``Ĥ⁻¹ u`` with ``Ĥ = Q max(Λ, floor) Qᵀ`` for the symmetrised ``H = QΛQᵀ`` (spec E2.4).

    The floor keeps the step a descent direction when ``H`` is indefinite (GOE noise) or
    singular (few gradients so far).

    Args:
        H: A ``k x k`` tensor.
        u: A ``k`` tensor.
        floor: ``λ_floor > 0``.

    Returns:
        The ``k`` tensor ``Ĥ⁻¹ u``.
    """
    eigenvalues, Q = torch.linalg.eigh((H + H.transpose(-1, -2)) / 2)
    return Q @ ((Q.transpose(-1, -2) @ u) / eigenvalues.clamp_min(floor))


def preconditioner_floor(k: int, noise_std: float, eps: float = ADAGRAD_EPS, scale: float = 1.0) -> float:
    r"""``λ_floor = max(eps, c_fl · 2√k · σ_B)``: the GOE spectral edge ``2√k σ_B`` of the
    preconditioner noise (0 for the free preconditioners), at least AdaGrad's ``eps``."""
    return max(eps, scale * 2.0 * math.sqrt(k) * noise_std)


def debiased_floor(k: int, noise_fourth_sum: float, eps: float = ADAGRAD_EPS, scale: float = 1.0) -> float:
    r"""``λ_floor = max(eps, c_fl (4k Σ_s σ_s⁴)^{1/4})`` for the debiased preconditioner.

    ``Σ_s (w_s w_sᵀ − σ_s² I)``, the noise left in the debiased sum, has entries of variance
    ``Σσ_s⁴`` off the diagonal (``2Σσ_s⁴`` on it): close to ``√(Σσ_s⁴)`` times a GOE matrix,
    whose spectral edge is ``2√k √(Σσ_s⁴)``. Eigenvalues of the debiased sum below that edge
    are noise, so its square root is floored at ``√(2√k √(Σσ_s⁴))``. Without this floor a
    direction the clip to PSD zeroed would be divided by ``eps`` while the released ``ũ_t``
    still carries noise of size ``σ_t`` there (steps of ``η σ_t / eps``).
    """
    return max(eps, scale * (4.0 * k * noise_fourth_sum) ** 0.25)


class FullMatrixAdagrad(torch.optim.Optimizer):
    r"""Full-matrix AdaGrad on released gradients, optionally in a public subspace (Kairouz et al., spec A3).

    Each ``step`` reads the released θ-space gradient ``g̃_t = Ṽ_t ũ_t`` from ``θ.grad`` and
    moves ``θ ← θ − η Ṽ_t Ĥ_t⁻¹ ũ_t`` (``ũ_t = Ṽ_tᵀ g̃_t``; the caller projects onto the box).
    ``Ĥ_t`` is a ``k x k`` preconditioner whose eigenvalues are floored at ``λ_floor``:

    - ``"noisy"`` (free): ``Ĥ_t = Ṽ_tᵀ (Σ_{s≤t} g̃_s g̃_sᵀ)^{1/2} Ṽ_t``;
    - ``"noisy_debiased"`` (free): ``Ĥ_t = Ṽ_tᵀ PSD(Σ_s g̃_s g̃_sᵀ − Σ_s σ_s² Ṽ_sṼ_sᵀ)^{1/2} Ṽ_t``,
      which removes the noise's expected contribution ``E[ũũᵀ] = ūūᵀ + σ² I`` (``σ_s``
      public), floored at the noise level of that difference (``debiased_floor``; an
      addition to the spec, which floors the free variants at ``eps`` only);
    - ``"private"``: ``Ĥ_t`` is the released preconditioner ``Ĝ_t`` (``k x k``, from
      ``GOEPreconditionerMechanism``), floored at ``max(eps, 2√k σ_B(t))``.

    With a fixed basis ``Ṽ`` the free preconditioners equal the spec's ``(Σ ũ_sũ_sᵀ)^{1/2}``
    in ``k`` coordinates; the statistics are kept in θ-space so that a basis that changes
    from step to step is handled too. Without a basis, ``Ṽ = I`` and this is ordinary
    full-matrix AdaGrad with eigenvalue floor ``eps``.

    State (checkpointed): ``step``, ``sum_outer`` (``Σ g̃ g̃ᵀ``, ``d x d``),
    ``noise_outer`` (``Σ σ² ṼṼᵀ``, ``d x d``) and ``noise_fourth`` (``Σ σ⁴``).

    Args:
        params: One parameter, ``θ`` (``d``).
        lr: ``η > 0``.
        preconditioner: ``"noisy"``, ``"noisy_debiased"`` or ``"private"``.
        eps: AdaGrad's ``eps``, the smallest eigenvalue of ``Ĥ``.
        floor_scale: ``c_fl`` of the private and debiased floors.
    """

    def __init__(
        self,
        params: Any,
        lr: float,
        *,
        preconditioner: Preconditioner = "noisy",
        eps: float = ADAGRAD_EPS,
        floor_scale: float = 1.0,
    ) -> None:
        if preconditioner not in PRECONDITIONERS:
            raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, got {preconditioner!r}.")
        if not lr > 0 or not eps > 0 or not floor_scale >= 0:
            raise ValueError("lr and eps must be positive and floor_scale non-negative.")
        super().__init__(params, dict(lr=lr, eps=eps, floor_scale=floor_scale))
        if len(self.param_groups) != 1 or len(self.param_groups[0]["params"]) != 1:
            raise ValueError("FullMatrixAdagrad takes exactly one parameter (θ).")
        self.preconditioner = preconditioner

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        r"""Load a ``state_dict``; ``ValueError`` if its sums are not ``d x d`` finite tensors."""
        d = self.param_groups[0]["params"][0].numel()
        for entry in dict(state_dict.get("state", {})).values():
            if set(entry) != {"step", "sum_outer", "noise_outer", "noise_fourth"}:
                raise ValueError(
                    "FullMatrixAdagrad state must hold step, sum_outer, noise_outer and noise_fourth, "
                    f"got {sorted(entry)}."
                )
            for key in ("sum_outer", "noise_outer"):
                value = entry[key]
                if not isinstance(value, Tensor) or value.shape != (d, d) or not torch.isfinite(value).all():
                    raise ValueError(f"FullMatrixAdagrad state {key!r} must be a finite {d} x {d} tensor.")
        super().load_state_dict(state_dict)

    # torch.optim.Optimizer.step's two overloads (no closure: None; a closure: its value), with the extras
    @overload
    def step(
        self,
        closure: None = None,
        *,
        basis: Tensor | None = None,
        noise_std: float = 0.0,
        released_preconditioner: Tensor | None = None,
        preconditioner_noise_std: float = 0.0,
    ) -> None: ...

    @overload
    def step(
        self,
        closure: Callable[[], float],
        *,
        basis: Tensor | None = None,
        noise_std: float = 0.0,
        released_preconditioner: Tensor | None = None,
        preconditioner_noise_std: float = 0.0,
    ) -> float: ...

    @torch.no_grad()
    def step(
        self,
        closure: Callable[[], float] | None = None,
        *,
        basis: Tensor | None = None,
        noise_std: float = 0.0,
        released_preconditioner: Tensor | None = None,
        preconditioner_noise_std: float = 0.0,
    ) -> float | None:
        r"""One step on ``θ.grad`` (the released ``g̃_t``, ``d``).

        Args:
            closure: Unused (``torch.optim`` signature); called if given.
            basis: The public ``d x k`` basis ``Ṽ_t`` (default ``I_d``).
            noise_std: ``σ_t``, the std of each released coordinate (for ``"noisy_debiased"``).
            released_preconditioner: The released ``k x k`` ``Ĝ_t`` (``"private"`` only).
            preconditioner_noise_std: ``σ_B(t)`` of that release (sets the floor).

        Returns:
            The closure's value, if any.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        group = self.param_groups[0]
        theta = group["params"][0]
        g = theta.grad.reshape(-1)
        d = g.shape[0]
        V = torch.eye(d, dtype=g.dtype, device=g.device) if basis is None else basis.to(g)
        if V.dim() != 2 or V.shape[0] != d:
            raise ValueError(f"basis must be d x k with d = {d}, got shape {tuple(V.shape)}.")
        k = V.shape[1]
        state = self.state[theta]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float64, device=g.device)
            state["sum_outer"] = torch.zeros(d, d, dtype=g.dtype, device=g.device)
            state["noise_outer"] = torch.zeros(d, d, dtype=g.dtype, device=g.device)
            state["noise_fourth"] = torch.zeros((), dtype=torch.float64, device=g.device)
        state["step"] += 1
        state["sum_outer"] += torch.outer(g, g)
        if noise_std:
            state["noise_outer"] += (noise_std**2) * (V @ V.transpose(0, 1))
            state["noise_fourth"] += noise_std**4
        u = V.transpose(0, 1) @ g
        if self.preconditioner == "private":
            if released_preconditioner is None or released_preconditioner.shape != (k, k):
                raise ValueError(f"The private preconditioner needs the released {k} x {k} matrix.")
            H = released_preconditioner.to(g)
            floor = preconditioner_floor(k, preconditioner_noise_std, group["eps"], group["floor_scale"])
        else:
            S = state["sum_outer"]
            floor = group["eps"]
            if self.preconditioner == "noisy_debiased":
                S = S - state["noise_outer"]
                floor = debiased_floor(k, float(state["noise_fourth"]), group["eps"], group["floor_scale"])
            H = V.transpose(0, 1) @ psd_sqrt(S) @ V
        direction = V @ floored_solve(H, u, floor)
        theta.add_(direction.reshape(theta.shape), alpha=-group["lr"])
        return loss
