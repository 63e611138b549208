r"""Users beyond one process: partitions that keep their own losses and send clipped sums.

- ``partitions``: the ``PartitionedObjective`` protocol, ``UserPartition`` and the
  in-process backend ``InProcessPartitions``;
- ``dask``: ``DaskPartitions``, the same on a ``dask.distributed`` cluster (needs the
  ``[dask]`` extra; imported only when used);
- ``synthetic``: cheap synthetic users generated where they are evaluated (tests, benchmark).

Drive them with ``DPGIBO.run(partitions)`` or ``DPGIBO.tell_partitioned``.
"""

from botorch_dp.distributed.partitions import (
    InProcessPartitions,
    PartitionedObjective,
    UserPartition,
    evaluate_partition,
    matching_prefix,
)

__all__ = ["InProcessPartitions", "PartitionedObjective", "UserPartition", "evaluate_partition", "matching_prefix"]
