r"""The one set of argument checks: privacy parameters (μ, ρ, ε, δ, B, n, T, σ, q), losses.

Each check returns the value converted to ``float``/``int`` and raises ``ValueError``
naming the parameter before anything is computed or released. Only ``check_losses``
needs torch, and imports it when called, so that ``privacy.analysis`` stays float-only.
"""

from __future__ import annotations

import difflib
import math
import numbers
import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

#: How non-finite per-user losses are handled (``DPGIBOConfig.nonfinite_losses``).
NONFINITE_LOSSES: tuple[str, ...] = ("refuse", "zero_user")

if TYPE_CHECKING:
    from torch import Tensor


def _as_float(value: object, name: str) -> float:
    r"""``float(value)``, or a ``ValueError`` naming ``name`` (``bool`` refused)."""
    if isinstance(value, (bool, str, bytes)) or type(value).__name__ == "bool_":
        raise ValueError(f"{name} must be a number, got {value!r}.")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a number, got {value!r}.") from err


def check_positive(value: float, name: str, *, allow_inf: bool = True) -> float:
    r"""``value > 0`` (NaN refused); ``math.inf`` only when ``allow_inf``."""
    value = _as_float(value, name)
    if math.isnan(value) or value <= 0.0 or (math.isinf(value) and not allow_inf):
        what = "positive (math.inf allowed)" if allow_inf else "positive and finite"
        raise ValueError(f"{name} must be {what}, got {value!r}.")
    return value


def check_nonnegative(value: float, name: str, *, allow_inf: bool = True) -> float:
    r"""``value >= 0`` (NaN refused); ``math.inf`` only when ``allow_inf``."""
    value = _as_float(value, name)
    if math.isnan(value) or value < 0.0 or (math.isinf(value) and not allow_inf):
        what = "non-negative (math.inf allowed)" if allow_inf else "non-negative and finite"
        raise ValueError(f"{name} must be {what}, got {value!r}.")
    return value


def check_greater(value: float, name: str, bound: float) -> float:
    r"""``bound < value < math.inf`` (NaN refused)."""
    value = _as_float(value, name)
    if not bound < value < math.inf:
        raise ValueError(f"{name} must be finite and exceed {bound:g}, got {value!r}.")
    return value


def as_integer(value: Any) -> int | None:
    r"""``value`` as a Python ``int`` if it is an integer, else ``None``.

    Accepts Python, numpy and 0-d integer-tensor integers and integral finite floats;
    ``bool`` (also numpy's and torch's) is not an integer here.
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return None
    if hasattr(value, "dim") and hasattr(value, "dtype"):  # a torch tensor (duck-typed): 0-d, integer dtype only
        if (
            value.dim() != 0
            or value.dtype.is_floating_point
            or value.dtype.is_complex
            or str(value.dtype) == "torch.bool"
        ):
            return None
        return int(value.item())
    try:
        return operator.index(value)  # int, numpy integers
    except TypeError:
        pass
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        value = float(value)
        if math.isfinite(value) and value == int(value):
            return int(value)
    return None


def check_positive_int(value: int, name: str) -> int:
    r"""An integer ``>= 1`` (numpy and 0-d tensor integers and integral floats accepted;
    ``bool``, NaN, ``inf`` and non-integral values refused)."""
    integer = as_integer(value)
    if integer is None or integer < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return integer


def check_nonnegative_int(value: int, name: str) -> int:
    r"""An integer ``>= 0`` (as ``check_positive_int``, but 0 allowed)."""
    integer = as_integer(value)
    if integer is None or integer < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}.")
    return integer


def check_probability(value: float, name: str, *, allow_one: bool = False) -> float:
    r"""A probability in ``(0, 1)``, or in ``(0, 1]`` when ``allow_one`` (a sample rate)."""
    value = _as_float(value, name)
    if allow_one and not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}.")
    if not allow_one and not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {value!r}.")
    return value


def check_delta(value: float, name: str = "delta") -> float:
    r"""A δ of an (ε, δ) statement: a probability in the open interval ``(0, 1)``."""
    return check_probability(value, name)


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    r"""`` Did you mean 'x'?`` for the choice closest to a misspelled string ``value`` (``difflib``), else ``""``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    if not close:  # a difference of case or separators only ("DP-GIBO" for "dp_gibo")
        folded = {c.lower().replace("-", "_").replace(" ", "_"): c for c in choices}
        close = [folded[k] for k in (value.lower().replace("-", "_").replace(" ", "_"),) if k in folded]
    return f" Did you mean {close[0]!r}?" if close else ""


def check_choice(value: str, name: str, choices: tuple[str, ...]) -> str:
    r"""One of ``choices`` (an option string such as a distribution or accountant name); a
    misspelling is refused with the closest choice (``did_you_mean``)."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.{did_you_mean(value, choices)}")
    return value


def check_history_entry(
    noise_multiplier: float, sample_rate: float, num_steps: int, *, steps_name: str = "num_steps"
) -> tuple[float, float, int]:
    r"""One Opacus accountant history entry: ``num_steps`` Gaussian steps (e.g. a DP-SGD run).

    Args:
        noise_multiplier: Noise std over ℓ2-sensitivity, ``σ ≥ 0`` and finite (0: no noise).
        sample_rate: Poisson sampling rate ``q ∈ (0, 1]``.
        num_steps: Number of steps, an integer ``≥ 1``.
        steps_name: The caller's name for ``num_steps``, used in the error message.

    Returns:
        ``(σ, q, steps)`` as ``(float, float, int)``.
    """
    return (
        check_nonnegative(noise_multiplier, "noise_multiplier", allow_inf=False),
        check_probability(sample_rate, "sample_rate", allow_one=True),
        check_positive_int(num_steps, steps_name),
    )


def all_finite(values: Tensor) -> bool:
    r"""Whether every entry of a floating-point tensor is finite, in one pass that allocates
    nothing: NaN and ``±inf`` make the sum NaN or infinite, and only when the sum is not
    finite (possibly an overflow of large finite values) are the entries tested one by one."""
    return bool(values.sum().isfinite()) or bool(values.isfinite().all())


def check_losses(losses: Tensor, num_points: int, num_users: int | None = None, *, nonfinite: str = "refuse") -> None:
    r"""Reject malformed per-user losses before anything is computed from them.

    Args:
        losses: A ``q x n`` floating-point tensor of per-user losses at ``q`` points.
        num_points: The expected ``q``.
        num_users: The expected ``n`` (``None`` accepts any ``n ≥ 1``).
        nonfinite: ``"refuse"`` (default): NaN or ``inf`` entries raise. ``"zero_user"``:
            they are accepted (the mechanism then sets those users' contributions to 0).

    Raises:
        ValueError: With a message naming the problem (type, shape, dtype, number of
            users, non-finite entries and the points where they are). A refusal of
            non-finite losses is itself observable: it reveals that some user's loss at
            those points was not finite.
    """
    import torch
    from torch import Tensor

    if not isinstance(losses, Tensor):
        raise ValueError(f"losses must be a torch.Tensor, got {type(losses).__name__}.")
    if losses.dim() != 2 or losses.shape[0] != num_points:
        raise ValueError(
            f"losses must be a (num_points x num_users) = ({num_points} x n) tensor, got shape {tuple(losses.shape)}."
        )
    if losses.shape[1] < 1:
        raise ValueError("losses must have at least one user (n >= 1).")
    if num_users is not None and losses.shape[1] != num_users:
        raise ValueError(
            f"losses have {losses.shape[1]} users, earlier evaluations had {num_users}; "
            "the number of users must stay fixed."
        )
    if not losses.is_floating_point():
        raise ValueError(f"losses must be floating point, got {losses.dtype}.")
    check_choice(nonfinite, "nonfinite_losses", NONFINITE_LOSSES)
    if nonfinite == "refuse" and not all_finite(losses):
        bad = ~torch.isfinite(losses)
        rows = sorted(set(bad.nonzero()[:, 0].tolist()))
        raise ValueError(
            f"losses contain {int(bad.sum())} non-finite values (NaN or inf) at point(s) "
            f"{rows}; nothing was released. Note that this refusal is itself visible: it "
            "reveals that some user's loss at these points was not finite. Fix the "
            "objective and tell these points again, or set nonfinite_losses='zero_user'."
        )


def empty_batch_losses(objective: Callable[[Tensor], Tensor], X: Tensor) -> Tensor:
    r"""The ``0 x n`` losses of an empty first batch, from the objective itself."""
    from torch import Tensor  # torch stays out of this module's import (the analysis is pure float)

    try:
        losses = objective(X)
    except Exception as err:  # noqa: BLE001 - re-raised with the reason
        raise ValueError(
            "The first batch is empty, so the number of users n is unknown; the objective "
            "failed on the empty 0 x d batch. Make it return a 0 x n tensor there."
        ) from err
    if not isinstance(losses, Tensor) or losses.dim() != 2 or losses.shape[0] != 0 or losses.shape[1] < 1:
        raise ValueError(
            "The first batch is empty, so the number of users n is unknown; the objective "
            "must return a 0 x n tensor for the empty batch."
        )
    return losses


def check_told_batch(
    points: Tensor, losses: Tensor, pending: Tensor, num_users: int | None, nonfinite: str
) -> tuple[Tensor, Tensor]:
    r"""The asked points and a float64 COPY of the told losses on the points' device (detached from any
    autograd graph, so a caller reusing its buffer cannot change what is stored), or a
    ``ValueError`` naming the problem.

    Args:
        points: What the caller passed as the points; must equal ``pending``.
        losses: What the caller passed as the ``b x n`` losses (tensor, array or list).
        pending: The points of the last ``ask``.
        num_users: ``n`` of earlier batches (``None`` before the first).
        nonfinite: ``DPGIBOConfig.nonfinite_losses``.
    """
    import torch

    try:
        points = torch.as_tensor(points).detach().to(pending.device, torch.float64)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"points must be the tensor returned by ask(), got {type(points).__name__}.") from err
    if points.shape != pending.shape or not torch.allclose(points, pending):
        raise ValueError("tell() must receive the points returned by the last ask().")
    try:  # Python lists become float64 (torch's default float32 would round them)
        as_list = isinstance(losses, (list, tuple))
        losses = torch.as_tensor(losses, dtype=torch.float64 if as_list else None).detach()
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"losses must be a (num_points x num_users) tensor, got {type(losses).__name__}.") from err
    if losses.dim() == 2 and losses.shape[0] == 0 and num_users is not None:
        losses = losses.reshape(0, num_users)
    check_losses(losses, points.shape[0], num_users, nonfinite=nonfinite)
    return pending.clone(), losses.to(device=pending.device, dtype=torch.float64, copy=True)
