r"""Moved to ``botorch_dp.methods.private_random_search``; this module keeps the old import path."""

from botorch_dp.methods.private_random_search import (
    LOSS_CLIP_POINTS,
    LOSS_CLIP_QUANTILE,
    PrivateRandomSearchMethod,
    proxy_loss_clip,
)

__all__ = ["LOSS_CLIP_POINTS", "LOSS_CLIP_QUANTILE", "PrivateRandomSearchMethod", "proxy_loss_clip"]
