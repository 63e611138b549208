r"""A ``DPGIBOConfig`` of the option pins' settings with some families given as strategy objects.

The pins' settings (``tests/test_option_pins._settings``) spell the clip and the batches with the
old flat keywords; ``config_with`` drops the old keywords of each family it is given an object
for, so the two spellings do not meet in one config (which ``DPGIBOConfig`` refuses).
"""

from __future__ import annotations

from typing import Any

from botorch_dp.optim import DPGIBOConfig
from botorch_dp.optim.legacy_options import FLAT_FIELDS

__all__ = ["config_with"]


def config_with(settings: dict[str, Any], **strategies: Any) -> DPGIBOConfig:
    r"""``DPGIBOConfig(**settings, **strategies)``, less the old keywords of the families in ``strategies``."""
    kept = {k: v for k, v in settings.items() if not (k in FLAT_FIELDS and FLAT_FIELDS[k][0] in strategies)}
    return DPGIBOConfig(**kept, **strategies)
