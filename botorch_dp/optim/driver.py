r"""``DPGIBO.run``'s driver: ask, evaluate the batch (in this process, on an executor, or in the
partitions that hold the users), tell, until the run is done, with a tqdm bar of public values.
It uses the run's public ask/tell interface only (``AskTell``), and is told the number of steps."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Protocol

from torch import Tensor

from botorch_dp.distributed.partitions import PartitionedObjective
from botorch_dp.evaluation import evaluate_rows
from botorch_dp.optim.results import DPGIBOResult, IterationInfo, PrivacyGuarantee
from botorch_dp.privacy.checks import empty_batch_losses
from botorch_dp.utils import progress_bar

__all__ = ["AskTell", "run_to_end"]


class AskTell(Protocol):
    r"""What the driver reads of a ``DPGIBO``: its public ask/tell interface."""

    @property
    def is_done(self) -> bool: ...

    @property
    def iteration(self) -> int: ...

    @property
    def num_users(self) -> int | None: ...

    def ask(self) -> Tensor: ...

    def tell(self, points: Tensor, losses: Tensor) -> IterationInfo: ...

    def tell_partitioned(self, points: Tensor, partitions: PartitionedObjective) -> IterationInfo: ...

    def guarantee(self, delta: float | None = None) -> PrivacyGuarantee: ...

    def result(self) -> DPGIBOResult: ...


def run_to_end(
    opt: AskTell,
    objective: Callable[[Tensor], Tensor] | PartitionedObjective,
    total: int,
    callback: Callable[[IterationInfo], bool | None] | None,
    progress: bool,
    executor: concurrent.futures.Executor | None,
) -> DPGIBOResult:
    r"""Run ``opt``'s remaining iterations (``total``: the most steps, for the bar; the other arguments
    as ``DPGIBO.run``'s) and return its result."""
    bar = progress_bar(total=total, initial=opt.iteration, disable=not progress, desc="DP-GIBO")
    try:
        while not opt.is_done:
            X = opt.ask()
            if isinstance(objective, PartitionedObjective):  # the losses stay in the partitions
                info = opt.tell_partitioned(X, objective)
            elif X.shape[0] > 0:
                info = opt.tell(X, evaluate_rows(objective, X, executor=executor))
            else:  # an empty batch: only the objective knows n before the first tell
                n = opt.num_users  # the empty losses on the points' device
                info = opt.tell(X, X.new_empty(0, n) if n else empty_batch_losses(objective, X))
            if info.selected_index is None:  # a step (not the evaluated selection)
                bar.update(1)
                bar.set_postfix(
                    b=info.batch_size, trace=f"{info.posterior_trace:.3g}", eps=f"{opt.guarantee().epsilon:.3g}"
                )
            if callback is not None and callback(info):
                break
    finally:
        bar.close()
    return opt.result()
