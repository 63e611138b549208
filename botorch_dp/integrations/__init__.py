r"""Integrations with other optimization frameworks (optional dependencies).

- ``botorch_dp.integrations.ax``: the GIBO acquisition as an Ax generation strategy, with
  joint q-batches, a centre θ that moves between rounds, and θ mapped between the unit
  cube, natural units and Ax's parameter space. Needs ``pip install 'botorch-dp[ax]'``.
- ``botorch_dp.integrations.optuna``: an Optuna objective tuned privately by ``tune``
  (``create_private_study``; the space read from its suggest calls, only released values shown
  or stored). Needs ``pip install 'botorch-dp[optuna]'``.

Importing this package imports no framework: each integration is a submodule, imported
only when asked for (``from botorch_dp.integrations.ax import AxGIBO``).
"""

from __future__ import annotations

__all__: list[str] = []
