r"""``DaskPartitions``: users' loss rows kept on ``dask.distributed`` workers.

Needs the ``[dask]`` extra (``pip install "botorch-dp[dask]"``). Each partition's loss
block at each batch of ``D`` is one Dask task result (``evaluate_partition``) that stays on
the worker that computed it; per step one task per partition forms the partition's sum of
clipped estimates from its blocks (``privacy.mechanisms.clipped_partial_sum``) and only
that ``d``-vector and two counts come back. The driver never holds a loss.

Fault tolerance is Dask's: a block lost with its worker is recomputed from its task
(the partition evaluated again at the same points, where Dask places it), a task that was
running on a dead worker is retried (up to ``distributed.scheduler.allowed-failures``
times), and the driver's step either gets every partial sum or raises and releases
nothing (``DPGIBO.tell_partitioned`` then rolls back). Recomputed losses equal the first
ones when the partition is deterministic (as ``SyntheticUsers`` is); a partition whose
losses are random should load them from its own storage instead.

What travels: the partition objects and the batches' points (public) to the workers;
``A`` (public) to the workers; per step one ``ClippedPartialSum`` per partition to the
driver (SENSITIVE until noised: run the cluster on a trusted network or with TLS,
``distributed.security.Security``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence

import torch
from distributed import Client, Future, wait
from torch import Tensor

from botorch_dp.distributed.partitions import UserPartition, evaluate_partition, matching_prefix, partition_clamped_sums
from botorch_dp.privacy.checks import check_positive_int
from botorch_dp.privacy.mechanisms import ClippedPartialSum, NonfiniteLosses, clipped_partial_sum
from botorch_dp.privacy.mechanisms.sums import ClampedPartialSum

__all__ = ["DaskPartitions", "partition_partial_sum"]


def partition_partial_sum(
    A: Tensor, clip_bound: float, chunk_size: int, nonfinite: NonfiniteLosses, *blocks: Tensor
) -> ClippedPartialSum:
    r"""One partition's ``ClippedPartialSum`` from its loss blocks (runs on the worker holding them)."""
    return clipped_partial_sum(A, list(blocks), clip_bound, chunk_size, nonfinite=nonfinite)


def _points_token(points: Tensor) -> str:
    return hashlib.sha256(points.numpy().tobytes() + str(tuple(points.shape)).encode()).hexdigest()[:16]


class DaskPartitions:
    r"""A ``PartitionedObjective`` whose partitions keep their rows on a Dask cluster.

    Args:
        client: A ``distributed.Client`` (``Client(LocalCluster(...))`` or
            ``Client("scheduler-address")``).
        partitions: The ``UserPartition`` objects (picklable: they are sent to the workers,
            where they evaluate their users), in the fixed order of the partial sums.
        workers: Optional worker addresses; partition ``p`` prefers ``workers[p % len]``
            (Dask may move it if that worker is lost). ``None``: the client's workers at
            construction, in address order.
    """

    def __init__(
        self, client: Client, partitions: Sequence[UserPartition], *, workers: Sequence[str] | None = None
    ) -> None:
        if len(partitions) == 0:
            raise ValueError("partitions: at least one partition is needed.")
        self.client = client
        self.partitions = list(partitions)
        self.num_partitions = len(self.partitions)
        self.num_users = sum(
            check_positive_int(p.num_users, f"num_users of partition {i}") for i, p in enumerate(self.partitions)
        )
        if workers is None:
            workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        self.workers = list(workers)
        self._name = uuid.uuid4().hex[:12]  # keys of this object's tasks
        self._points: list[Tensor] = []
        self._blocks: list[list[Future]] = [[] for _ in self.partitions]

    def _home(self, index: int) -> list[str] | None:
        return [self.workers[index % len(self.workers)]] if self.workers else None

    def evaluate(self, batches: Sequence[Tensor], *, nonfinite: NonfiniteLosses = "refuse") -> None:
        r"""See ``PartitionedObjective.evaluate``: missing blocks are evaluated on the workers
        (all partitions in parallel); an error in any partition raises it here (a
        ``ValueError`` naming the partition for bad losses) and changes no partition's rows."""
        batches = [b.detach().to("cpu", torch.float64).clone() for b in batches]
        keep = matching_prefix(self._points, batches)
        new: list[list[Future]] = []
        for i in range(self.num_partitions):
            futures = []
            for t in range(keep, len(batches)):
                key = f"botorch-dp-losses-{self._name}-p{i}-b{t}-{_points_token(batches[t])}"
                futures.append(
                    self.client.submit(
                        evaluate_partition,
                        self.partitions[i],
                        batches[t],
                        i,
                        nonfinite,
                        key=key,
                        workers=self._home(i),
                        allow_other_workers=True,
                        retries=0,
                    )
                )
            new.append(futures)
        flat = [f for futures in new for f in futures]
        wait(flat)
        failed = [f for f in flat if f.status == "error"]
        if failed:
            error = failed[0].exception()
            for f in flat:
                f.release()
            raise error
        self._blocks = [blocks[:keep] + futures for blocks, futures in zip(self._blocks, new, strict=True)]
        self._points = batches

    def partial_sums(
        self, A: Tensor, *, clip_bound: float, chunk_size: int, nonfinite: NonfiniteLosses = "refuse"
    ) -> list[ClippedPartialSum]:
        r"""See ``PartitionedObjective.partial_sums``: one task per partition on the worker
        holding its blocks; only the ``ClippedPartialSum`` objects are gathered, in partition order."""
        A = A.detach().to("cpu", torch.float64).clone()
        futures = [
            self.client.submit(
                partition_partial_sum,
                A,
                float(clip_bound),
                int(chunk_size),
                nonfinite,
                *blocks,
                pure=False,
                workers=self._home(i),
                allow_other_workers=True,
            )
            for i, blocks in enumerate(self._blocks)
        ]
        return list(self.client.gather(futures))

    def clamped_loss_sums(
        self, points: Tensor, *, loss_clip: float, chunk_size: int, nonfinite: NonfiniteLosses = "refuse"
    ) -> list[ClampedPartialSum]:
        r"""See ``PartitionedObjective.clamped_loss_sums``: one task per partition (preferring its
        home worker) evaluates its users at ``points`` and returns only the ``q`` sums."""
        points = points.detach().to("cpu", torch.float64).clone()
        futures = [
            self.client.submit(
                partition_clamped_sums,
                partition,
                points,
                i,
                float(loss_clip),
                int(chunk_size),
                nonfinite,
                pure=False,
                workers=self._home(i),
                allow_other_workers=True,
            )
            for i, partition in enumerate(self.partitions)
        ]
        return list(self.client.gather(futures))

    def close(self) -> None:
        r"""Release this object's blocks on the cluster (the client stays open)."""
        for f in (f for blocks in self._blocks for f in blocks):
            f.release()
        self._blocks = [[] for _ in self.partitions]
        self._points = []
