r"""Where privacy noise gets its randomness: OS entropy by default, a seed only on request.

Noise that anyone can regenerate protects nothing: with a known seed an observer
subtracts the noise from a release. Every function in the package that draws privacy
noise therefore takes ``seed: int | None = None``; ``None`` draws the noise from the
operating system's entropy (``privacy.mechanisms.os_entropy_normal``). A seed given
explicitly (tests, reproductions of a paper) still works and raises ``PrivacyWarning``.
Public randomness, such as candidate-search restarts, is a separate stream.
"""

from __future__ import annotations

import warnings
from typing import overload

import torch

from botorch_dp.utils import child_seeds


class PrivacyWarning(UserWarning):
    r"""A setting weakens or voids the privacy guarantee (e.g. a reproducible noise seed)."""


@overload
def noise_generator(seed: None, *, stream: int = 0, stacklevel: int = 3) -> None: ...
@overload
def noise_generator(seed: int, *, stream: int = 0, stacklevel: int = 3) -> torch.Generator: ...
def noise_generator(seed: int | None, *, stream: int = 0, stacklevel: int = 3) -> torch.Generator | None:
    r"""The generator of a privacy-noise stream.

    Args:
        seed: ``None`` (default): no generator; the mechanisms then draw from OS entropy.
            An integer: a seeded generator (child stream ``stream`` of ``seed``) and a
            ``PrivacyWarning``.
        stream: Which child stream of ``seed`` (keep noise apart from other randomness).
        stacklevel: Passed to ``warnings.warn`` so the warning points at the caller.

    Returns:
        ``None`` or a seeded CPU ``torch.Generator``.
    """
    if seed is None:
        return None
    warnings.warn(
        "A noise seed was given: the privacy noise is reproducible, and the guarantee "
        "assumes the seed stays secret. Leave seed=None to draw the noise from OS entropy.",
        PrivacyWarning,
        stacklevel=stacklevel,
    )
    return torch.Generator().manual_seed(child_seeds([int(seed), int(stream)], 1)[0])
