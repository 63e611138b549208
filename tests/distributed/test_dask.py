"""botorch_dp.distributed.dask on a LocalCluster(n_workers=2, processes=True): the distributed run
is the in-process run bit for bit; a worker killed mid-iteration costs neither a second release
nor an evaluation; bad losses on one partition release nothing."""

import math
import os
import signal
import warnings
from pathlib import Path

import pytest
import torch
from distributed import Client, LocalCluster
from gpytorch.kernels import RBFKernel

from botorch_dp.distributed import InProcessPartitions
from botorch_dp.distributed.dask import DaskPartitions
from botorch_dp.distributed.synthetic import SyntheticUsers, synthetic_partitions
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.seeding import PrivacyWarning

D = 3
SIZES = [20, 20]


@pytest.fixture(scope="module")
def dask_client():
    with (
        LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as c,
    ):
        yield c


def config(**kw) -> DPGIBOConfig:
    kernel = RBFKernel(ard_num_dims=D)
    kernel.lengthscale = 1.0
    base = dict(
        kernel=kernel,
        bounds=torch.tensor([[-1.0] * D, [1.0] * D], dtype=torch.float64),
        num_iterations=2,
        privacy_mu=1.0,
        clip_bound=0.5,
        batch_size=2,
        step_size=0.3,
        num_restarts=1,
        raw_samples=8,
        seed=3,
        user_chunk_size=20,  # one chunk per partition: the same sums as one process with all users
    )
    return DPGIBOConfig(**{**base, **kw})


def new(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return DPGIBO(cfg)


class DyingUsers(SyntheticUsers):
    """Kills its worker process the first time it is evaluated after ``armed`` appears."""

    def __init__(self, num_users, dim, seed, armed: str, died: str):
        super().__init__(num_users, dim, seed)
        self.armed, self.died = armed, died

    def __call__(self, X):
        if os.path.exists(self.armed) and not os.path.exists(self.died):
            Path(self.died).touch()
            os._exit(1)  # a crash: no clean shutdown, the rows held by this worker are lost
        return super().__call__(X)


class NaNUsers(SyntheticUsers):
    def __call__(self, X):
        losses = super().__call__(X)
        losses[:, 0] = math.nan
        return losses


def test_dask_run_equals_the_in_process_run_bit_for_bit(dask_client):
    parts = synthetic_partitions(SIZES, D, seed=5)
    plain = new(config()).run(lambda X: torch.cat([p(X) for p in parts], 1), progress=False).release
    local = new(config()).run(InProcessPartitions(parts), progress=False).release
    partitions = DaskPartitions(dask_client, parts)
    driver = new(config())
    remote = driver.run(partitions, progress=False).release
    for other in (local, remote):
        assert torch.equal(plain.released_gradients, other.released_gradients)
        assert torch.equal(plain.iterates, other.iterates) and plain.guarantee == other.guarantee
    assert list(driver.state.blocks) == [] and driver.num_users == 40
    # the rows stay on the workers: one block per partition and batch, none in this process
    assert [len(b) for b in partitions._blocks] == [2, 2]
    assert {f.status for b in partitions._blocks for f in b} == {"finished"}
    partitions.close()


@pytest.mark.timeout(600)
def test_a_worker_killed_mid_iteration_costs_no_second_release_and_no_evaluation(dask_client, tmp_path):
    armed, died = str(tmp_path / "armed"), str(tmp_path / "died")
    parts = [DyingUsers(20, D, 5, armed, died), SyntheticUsers(20, D, 6)]
    reference = (
        new(config(num_iterations=3))
        .run(InProcessPartitions(synthetic_partitions(SIZES, D, 5)), progress=False)
        .release
    )
    partitions = DaskPartitions(dask_client, parts)
    opt = new(config(num_iterations=3))
    opt.tell_partitioned(opt.ask(), partitions)
    # kill, between the evaluations and the partial sums, the worker holding partition 1's rows
    X = opt.ask()
    partitions.evaluate([*opt.evaluation_points.split(list(opt.state.batch_sizes)), X])
    holder = next(iter(dask_client.who_has(partitions._blocks[1])[partitions._blocks[1][0].key]))
    pid = dask_client.run(os.getpid, workers=[holder])[holder]
    os.kill(pid, signal.SIGKILL)
    opt.tell_partitioned(X, partitions)  # the lost rows are recomputed where Dask puts them
    dask_client.wait_for_workers(2, timeout=240)  # the nanny restarts the killed worker
    # and the partition that dies in its next evaluation is evaluated again elsewhere
    Path(armed).touch()
    opt.tell_partitioned(opt.ask(), partitions)
    assert os.path.exists(died)
    result = opt.result().release
    assert torch.equal(result.released_gradients, reference.released_gradients)
    assert torch.equal(result.iterates, reference.iterates)
    assert sorted(k for _, k in opt.ledger.validation.steps()) == ["step-0000", "step-0001", "step-0002"]
    partitions.close()


def test_bad_losses_on_one_partition_raise_naming_it_and_release_nothing(dask_client):
    partitions = DaskPartitions(dask_client, [SyntheticUsers(20, D, 1), NaNUsers(20, D, 2)])
    opt = new(config())
    X = opt.ask()
    with pytest.raises(ValueError, match=r"partition 1: losses contain 2 non-finite values"):
        opt.tell_partitioned(X, partitions)
    assert (
        opt.ledger.validation.steps() == {}
        and opt.iteration == 0
        and opt.result().release.released_gradients.numel() == 0
    )
    assert partitions._points == [] and partitions._blocks == [[], []]  # no partition kept rows
    partitions.close()


#: Option sets that used to be refused on partitions (issue 29, item 3), as the pins spell them.
_ON_DASK = {
    "adaptive_clip+adaptive_norm+posterior+min_noisy_norm": (
        "clip.adaptive",
        "noise.adaptive_norm",
        "projection.posterior",
        "selection.min_noisy_norm",
    ),
    "adaptive_clip+public_pca+noisy_loss+adaptive_batches": (
        "clip.adaptive",
        "projection.public_pca",
        "selection.noisy_loss",
        "batches.adaptive",
    ),
    "private_preconditioner+fixed_basis+exponential": (
        "step.adagrad_full_private",
        "projection.fixed",
        "selection.exponential",
    ),
}


@pytest.mark.parametrize("name", sorted(_ON_DASK))
def test_every_option_runs_on_dask_as_in_one_process(dask_client, name):
    r"""Adaptive clipping, the adaptive schedule, subspaces, the private preconditioner and the
    evaluated selections on ``DaskPartitions`` (two worker processes, one chunk of users per
    partition): the run is the in-memory run bit for bit, and the ledger holds the same records."""
    from tests.test_option_pins import FAMILIES, N, _Half, _objective, _settings

    overrides: dict = {}
    for option in _ON_DASK[name]:
        family, value = option.split(".")
        overrides.update(FAMILIES[family][value])
    settings = {**_settings(overrides), "num_iterations": 3, "user_chunk_size": N // 2}
    memory_run, dask_run = new(DPGIBOConfig(**settings)), new(DPGIBOConfig(**settings))
    memory = memory_run.run(_objective, progress=False).release
    partitions = DaskPartitions(dask_client, [_Half(0), _Half(N // 2)])
    try:
        remote = dask_run.run(partitions, progress=False).release
    finally:
        partitions.close()
    for field in ("released_gradients", "iterates", "evaluation_points"):
        assert torch.equal(getattr(memory, field), getattr(remote, field)), field
    for field in ("clip_bounds", "clip_counts", "noisy_norms", "step_mus", "selected_index", "batch_sizes"):
        assert getattr(memory, field) == getattr(remote, field), field
    assert memory.guarantee == remote.guarantee and list(dask_run.state.blocks) == []
    assert [(r.key, r.event) for r in memory_run.ledger.validation.records()] == [
        (r.key, r.event) for r in dask_run.ledger.validation.records()
    ]
