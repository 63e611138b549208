r"""Checks of the public privacy parameters (μ, B, n, T, δ), shared by every entry point.

Each check returns the value converted to ``float``/``int`` and raises ``ValueError``
naming the parameter before anything is computed or released.
"""

from __future__ import annotations

import math


def check_positive(value: float, name: str, *, allow_inf: bool = True) -> float:
    r"""``value > 0`` (NaN refused); ``math.inf`` only when ``allow_inf``."""
    value = float(value)
    if math.isnan(value) or value <= 0.0 or (math.isinf(value) and not allow_inf):
        what = "positive (math.inf allowed)" if allow_inf else "positive and finite"
        raise ValueError(f"{name} must be {what}, got {value!r}.")
    return value


def check_positive_int(value: int, name: str) -> int:
    r"""An integer ``>= 1`` (``bool`` and non-integral floats refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def check_delta(value: float, name: str = "delta") -> float:
    r"""A probability in the open interval ``(0, 1)``."""
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {value!r}.")
    return value


def check_dp_gibo_parameters(
    *, clip_bound: float, privacy_mu: float, num_steps: int, num_users: int | None = None
) -> tuple[float, float, int, int | None]:
    r"""The parameters of the DP-GIBO Gaussian mechanism: ``B`` finite, ``μ`` (inf: no
    noise), ``T`` and, when known, ``n``."""
    return (
        check_positive(clip_bound, "clip_bound (B)", allow_inf=False),
        check_positive(privacy_mu, "privacy_mu (μ)"),
        check_positive_int(num_steps, "num_steps (T)"),
        None if num_users is None else check_positive_int(num_users, "num_users (n)"),
    )
