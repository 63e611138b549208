r"""A run of ``DPGIBO`` with strategy objects that today's config fields cannot name.

Today's ``DPGIBOConfig`` reads its option fields into strategies (``config.options``) and takes
only the package's own strategy objects in them (``config_options.absorb_strategies``), so a
user's clip policy or noise schedule cannot reach ``DPGIBO`` through a field yet. ``StrategyConfig``
is today's config plus one optional strategy object per family it overrides; everything that
reads the options (``check`` when the config is built, the budget split, the iteration cap, the
public checks, ``DPGIBO``) sees the same ``Options``. Once the config holds the strategies
(issue 42, item 1), ``StrategyConfig(clip=...)`` becomes ``DPGIBOConfig(clip=...)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from botorch_dp.optim import DPGIBOConfig
from botorch_dp.optim.options import Options

__all__ = ["StrategyConfig"]


@dataclass(frozen=True)
class StrategyConfig(DPGIBOConfig):
    r"""``DPGIBOConfig`` whose ``options`` take the given strategy objects (``None``: the field's)."""

    clip: Any = None
    noise: Any = None

    @property
    def options(self) -> Options:
        given = {name: value for name, value in (("clip", self.clip), ("noise", self.noise)) if value is not None}
        return dataclasses.replace(super().options, **given)
