"""botorch_dp.distributed.partitions and the partial-sum release of privacy.mechanisms: a
partitioned run is the in-process run (bit for bit when each partition is one chunk of users),
bad partitions are refused before any release, and retried steps release once."""

import math
import warnings

import pytest
import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.distributed import InProcessPartitions
from botorch_dp.distributed.synthetic import SyntheticUsers, synthetic_partitions
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.mechanisms import (
    ClippedPartialSum,
    GaussianGradientMechanism,
    clipped_mean_gradient,
    clipped_partial_sum,
    release_partial_sums,
)
from botorch_dp.privacy.mechanisms._noise import release_gaussian
from botorch_dp.privacy.seeding import PrivacyWarning

D = 3
SIZES = [20, 20]


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
        user_chunk_size=20,  # one chunk per partition: the partitioned sum is the in-process one, bit for bit
    )
    return DPGIBOConfig(**{**base, **kw})


def full_objective(parts):
    return lambda X: torch.cat([p(X) for p in parts], dim=1)


def quiet_run(opt, objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return opt.run(objective, progress=False)


def new(cfg, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return DPGIBO(cfg, **kw)


class CountingUsers(SyntheticUsers):
    """Synthetic users that count their evaluations (in-process only)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.calls = 0

    def __call__(self, X):
        self.calls += X.shape[0]
        return super().__call__(X)


class FlakyPartitions(InProcessPartitions):
    """Partial sums fail once (a lost partition computation), then work."""

    def __init__(self, parts):
        super().__init__(parts)
        self.failures_left = 1

    def partial_sums(self, A, **kw):
        if self.failures_left:
            self.failures_left -= 1
            raise ConnectionError("partition lost")
        return super().partial_sums(A, **kw)


# ------------------------------------------------------------------ the partial sums
def test_partial_sums_add_up_to_the_in_process_clipped_sum():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(4, 9, generator=g, dtype=torch.float64)
    Y = torch.randn(9, 50, generator=g, dtype=torch.float64) * 3
    Y[:, 7] *= 1e300  # overflows A y_i: the overflow-safe path, in both
    whole, _ = clipped_mean_gradient(A, [Y[:4], Y[4:]], 1.0, chunk_size=25)
    one = clipped_partial_sum(A, [Y[:4], Y[4:]], 1.0, chunk_size=25)
    assert torch.equal(one.total / 50, whole) and one.num_users == 50
    halves = [clipped_partial_sum(A, [Y[:4, s], Y[4:, s]], 1.0, chunk_size=25) for s in (slice(0, 25), slice(25, 50))]
    assert torch.equal((halves[0].total + halves[1].total) / 50, whole)  # one chunk per partition
    thirds = [clipped_partial_sum(A, Y[:, s], 1.0, chunk_size=7) for s in (slice(0, 10), slice(10, 33), slice(33, 50))]
    brute = torch.stack(
        [
            (A @ Y[:, i]) * min(1.0, 1.0 / float(torch.linalg.vector_norm(A @ Y[:, i])))
            if i != 7
            else (A @ (Y[:, i] / 1e300)) / torch.linalg.vector_norm(A @ (Y[:, i] / 1e300))
            for i in range(50)
        ]
    ).sum(0)
    assert torch.allclose(sum(p.total for p in thirds), brute, rtol=1e-12, atol=1e-12)
    assert sum(p.num_clipped for p in thirds) == sum(p.num_clipped for p in halves)


def test_release_of_partial_sums_refuses_bad_partials_before_drawing_noise():
    gen = torch.Generator().manual_seed(5)
    mech = GaussianGradientMechanism(clip_bound=1.0, num_users=10, privacy_mu=1.0, num_steps=4, generator=gen)
    ok = ClippedPartialSum(torch.full((3,), 0.5, dtype=torch.float64), 6, 0)
    state = gen.get_state()
    bad = [
        ([], "partials: no partial sums"),
        (
            [ok, ClippedPartialSum(torch.tensor([math.nan, 0.0, 0.0], dtype=torch.float64), 4, 0)],
            r"partials\[1\]: .*finite",
        ),
        ([ok, ClippedPartialSum(torch.zeros(2, dtype=torch.float64), 4, 0)], r"partials\[1\]: .*d-vector"),
        ([ok, ClippedPartialSum(torch.tensor([4.5, 0.0, 0.0], dtype=torch.float64), 4, 0)], r"partials\[1\]: .*n_P·B"),
        ([ok, ClippedPartialSum(torch.zeros(3, dtype=torch.float64), 3, 0)], "partials: the partitions hold 9 users"),
    ]
    for partials, message in bad:
        with pytest.raises(ValueError, match=message):
            release_partial_sums(mech, partials)
        assert torch.equal(gen.get_state(), state)  # no noise drawn
    # the release is the in-process one: sum in order, divide by n, the mechanism's noise and cost
    other = ClippedPartialSum(torch.tensor([0.25, -1.0, 2.0], dtype=torch.float64), 4, 1)
    release = release_partial_sums(mech, [ok, other], diagnostics=True)
    expected, _ = release_gaussian(
        (ok.total + other.total) / 10,
        sensitivity=mech.sensitivity,
        mu=mech.step_mu,
        generator=torch.Generator().set_state(state),
        secure_rng=False,
        magnitude_bound=mech.clip_bound,
    )
    assert torch.equal(release.gradient, expected)
    assert release.cost.mu == mech.step_mu and release.diagnostics.clip_fraction == 0.1


# ------------------------------------------------------------------ the partitioned loop
def test_partitioned_run_equals_the_in_process_run_bit_for_bit():
    parts = synthetic_partitions(SIZES, D, seed=5)
    plain = quiet_run(new(config()), full_objective(parts)).release
    opt = new(config(record_non_private_diagnostics=True))
    split = quiet_run(opt, InProcessPartitions(parts))
    assert torch.equal(plain.released_gradients, split.release.released_gradients)
    assert torch.equal(plain.iterates, split.release.iterates) and plain.guarantee == split.release.guarantee
    assert opt.num_users == sum(SIZES) and list(opt.state.blocks) == []  # the driver holds no loss
    assert split.diagnostics is not None
    # three partitions of unequal size (several chunks): the same up to the order of the sums
    uneven = synthetic_partitions([7, 13, 20], D, seed=5)
    a = quiet_run(new(config(user_chunk_size=4, num_iterations=1)), full_objective(uneven)).release
    b = quiet_run(new(config(user_chunk_size=4, num_iterations=1)), InProcessPartitions(uneven)).release
    assert torch.allclose(a.released_gradients, b.released_gradients, rtol=0, atol=1e-12)


def test_evaluations_are_kept_and_never_repeated():
    parts = [CountingUsers(n, D, 9 + k) for k, n in enumerate(SIZES)]
    partitions = InProcessPartitions(parts)
    opt = new(config(num_iterations=3))
    quiet_run(opt, partitions)
    assert [p.calls for p in parts] == [opt.evaluation_points.shape[0]] * 2  # each point once per partition
    batches = list(opt.evaluation_points.split(list(opt.state.batch_sizes)))
    partitions.evaluate(batches)  # the same batches again: nothing to evaluate
    assert [p.calls for p in parts] == [opt.evaluation_points.shape[0]] * 2
    partitions.evaluate(batches[:1] + [batches[1] + 0.01])  # a changed batch replaces it and drops the rest
    assert [p.calls for p in parts] == [opt.evaluation_points.shape[0] + batches[1].shape[0]] * 2


def test_bad_losses_on_one_partition_release_nothing():
    class NaNUsers(SyntheticUsers):
        def __call__(self, X):
            losses = super().__call__(X)
            losses[:, 3] = math.nan
            return losses

    parts = [SyntheticUsers(20, D, 1), NaNUsers(20, D, 2)]
    opt = new(config())
    X = opt.ask()
    with pytest.raises(ValueError, match=r"partition 1: losses contain 2 non-finite values"):
        opt.tell_partitioned(X, InProcessPartitions(parts))
    assert opt.ledger.validation.steps() == {} and opt.iteration == 0 and opt.num_users is None
    assert torch.equal(opt.ask(), X)  # still pending
    with pytest.raises(ValueError, match=r"partition 0: losses have 3 users"):

        class Liar(SyntheticUsers):
            def __call__(self, X):
                return super().__call__(X)[:, :3]

        opt.tell_partitioned(X, InProcessPartitions([Liar(20, D, 1)]))
    # "zero_user": those users contribute 0 (the release goes ahead, with n unchanged)
    zero = new(config(nonfinite_losses="zero_user"))
    zero.tell_partitioned(zero.ask(), InProcessPartitions(parts))
    assert len(zero.ledger.validation.steps()) == 1


def test_sensitive_fitting_and_mixing_are_refused():
    parts = InProcessPartitions(synthetic_partitions(SIZES, D, seed=5))
    # only the unsafe fitting path is refused: it needs the raw losses, which stay in the partitions
    opt = new(config(unsafe_allow_sensitive_fitting=True, hyperparameter_fit=lambda kernel, X, y: None))
    X = opt.ask()
    with pytest.raises(ValueError, match="partitions: partitioned users do not support hyperparameter_fit"):
        opt.tell_partitioned(X, parts)
    assert opt.ledger.validation.records() == [] and torch.equal(opt.ask(), X)
    opt = new(config())
    X = opt.ask()
    opt.tell_partitioned(X, parts)
    with pytest.raises(RuntimeError, match="use tell_partitioned"):
        opt.tell(opt.ask(), torch.zeros(2, 40, dtype=torch.float64))
    with pytest.raises(ValueError, match="n must stay fixed"):
        opt.tell_partitioned(opt.ask(), InProcessPartitions(synthetic_partitions([20], D, seed=5)))


def test_a_failed_partition_computation_is_retried_with_one_release(tmp_path):
    parts = synthetic_partitions(SIZES, D, seed=5)
    reference = quiet_run(new(config()), InProcessPartitions(parts)).release
    opt = new(config(), checkpoint_dir=tmp_path)
    flaky = FlakyPartitions(parts)
    X = opt.ask()
    state_before = (tmp_path / "state.json").read_bytes()
    with pytest.raises(ConnectionError):
        opt.tell_partitioned(X, flaky)
    # nothing released or recorded, in memory or on disk; the step is still pending
    assert opt.ledger.validation.steps() == {} and (tmp_path / "state.json").read_bytes() == state_before
    opt.tell_partitioned(X, flaky)  # the retry: one release, with the noise of the uninterrupted run
    assert len(opt.ledger.validation.steps()) == 1
    opt.close()  # the driver "stops" (one owner per checkpoint directory)
    # the driver's checkpoint is durable after the step; a resumed driver with fresh partitions
    # (they recompute their rows from the stored batches) finishes the run exactly
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        resumed = DPGIBO.resume(tmp_path, config())
    assert resumed.num_users == sum(SIZES) and list(resumed.state.blocks) == []
    result = quiet_run(resumed, InProcessPartitions(synthetic_partitions(SIZES, D, seed=5))).release
    assert torch.equal(result.released_gradients, reference.released_gradients)
    assert torch.equal(result.iterates, reference.iterates)
    assert sorted(k for _, k in resumed.ledger.validation.steps()) == ["step-0000", "step-0001"]
