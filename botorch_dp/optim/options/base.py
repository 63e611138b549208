r"""What every strategy of a run sees: the run's public plan, fixed once ``n`` is known."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from botorch_dp.optim.options.budget import BudgetSplit

__all__ = ["RunPlan"]


@dataclass(frozen=True)
class RunPlan:
    r"""The public constants of a run that its strategies share.

    Attributes:
        num_iterations: ``T`` (the fixed schedule's steps; ``μ/√T`` per step).
        iteration_cap: The most steps (``T``, or ``T_max`` of an adaptive schedule).
        dim: ``d``.
        num_users: ``n`` (0 until the first batch is told).
        split: The run's ``BudgetSplit``.
        generator: The privacy-noise generator (``None``: OS entropy).
        chunk_size: Users per chunk (``None``: ``default_chunk_size``).
        diagnostics: Whether NON-PRIVATE diagnostics are recorded.
    """

    num_iterations: int
    iteration_cap: int
    dim: int
    num_users: int
    split: BudgetSplit
    generator: torch.Generator | None = None
    chunk_size: int | None = None
    diagnostics: bool = False
