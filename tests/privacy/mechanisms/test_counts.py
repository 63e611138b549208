r"""Adaptive clipping's noisy count (``privacy.mechanisms.counts``, Andrew et al. 2021): its
sensitivity 1 by brute force over neighbouring loss matrices, the count in chunks and row
blocks, the grid release of standard deviation ``1/μ`` (the generator's draws, and a fixed-seed
χ² bound), refusals before anything is recorded or drawn, and the record made before the draw.
"""

import itertools
import math
from typing import Any

import pytest
import torch

from botorch_dp.privacy.ledger import PrivacyBudgetExceeded
from botorch_dp.privacy.ledger.events import Gaussian
from botorch_dp.privacy.mechanisms import GaussianClipCountMechanism, count_within_clip
from botorch_dp.privacy.mechanisms._noise import release_gaussian


def test_count_changes_by_at_most_one_between_neighbouring_loss_matrices():
    # brute force: every user replaced by every column of a pool that straddles B (zeros,
    # tiny, huge, the other users' losses, a sign flip), at several bounds
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 4, generator=g, dtype=torch.float64)
    Y = torch.randn(4, 6, generator=g, dtype=torch.float64)
    pool = [
        torch.zeros(4, dtype=torch.float64),
        torch.full((4,), 1e-300, dtype=torch.float64),
        torch.full((4,), 1e300, dtype=torch.float64),
        *Y.T,
        *(-Y.T),
        5 * Y.T[0],
    ]
    norms = (A @ Y).norm(dim=0)
    for bound in [norms.min().item() / 2, norms.median().item(), norms.max().item() * 2, 1.0]:
        base = count_within_clip(A, Y, bound)
        assert base == int((norms <= bound).sum())  # the reference: explicit norms
        for i, column in itertools.product(range(Y.shape[1]), pool):
            neighbour = Y.clone()
            neighbour[:, i] = column.to(torch.float64)
            assert abs(count_within_clip(A, neighbour, bound) - base) <= 1


def test_count_is_the_same_in_chunks_and_row_blocks():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(2, 5, generator=g, dtype=torch.float64)
    Y = torch.randn(5, 37, generator=g, dtype=torch.float64)
    whole = count_within_clip(A, Y, 1.0)
    assert 0 < whole < 37
    assert count_within_clip(A, [Y[:2], Y[2:]], 1.0, chunk_size=4) == whole
    assert count_within_clip(A[:, :0], Y[:0], 1.0) == 37  # no evaluations yet: every estimate is 0


def test_count_handles_nonfinite_and_overflowing_users():
    A = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    Y = torch.tensor([[0.1, math.nan, 1e308], [0.1, 0.0, 1e308]], dtype=torch.float64)
    with pytest.raises(ValueError, match="non-finite"):
        count_within_clip(A, Y, 1.0)
    # zero_user: the NaN user's estimate is 0 (within); the overflowing one is above B
    assert count_within_clip(A, Y, 1.0, nonfinite="zero_user") == 2


def test_count_release_adds_noise_of_std_one_over_mu_and_returns_its_cost():
    g = torch.Generator().manual_seed(2)
    A = torch.randn(2, 3, generator=g, dtype=torch.float64)
    Y = torch.randn(3, 10, generator=g, dtype=torch.float64)
    exact = count_within_clip(A, Y, 0.8)
    mech = GaussianClipCountMechanism(num_users=10, generator=torch.Generator().manual_seed(5))
    release = mech.release(A, Y, 0.8, 0.25)
    # the grid release of the integer count (sensitivity 1, at most n) on the generator's draws
    expected, noise = release_gaussian(
        torch.tensor([float(exact)], dtype=torch.float64),
        sensitivity=1.0,
        mu=0.25,
        generator=torch.Generator().manual_seed(5),
        secure_rng=False,
        magnitude_bound=10.0,
    )
    assert release.noise_std == 4.0 and release.cost.mu == 0.25
    assert noise is not None and 4.0 <= noise.noise_std < 4.0 * (1 + 2.0**-20 * (2 + 1 / 0.25))
    assert release.count == float(expected[0]) and abs(release.count - exact) < 10 * 4.0
    with pytest.raises(ValueError, match="Expected 10 users"):
        mech.release(A, Y[:, :9], 0.8, 0.25)
    with pytest.raises(ValueError, match="clip_bound"):
        mech.release(A, Y, -1.0, 0.25)


class _Meter:
    r"""A stand-in for a charged step's meter: keeps what is recorded and the generator's state then."""

    def __init__(self, generator: torch.Generator, refuse: bool = False) -> None:
        self.generator, self.refuse = generator, refuse
        self.records: list[tuple[Any, Any, torch.Tensor]] = []

    def record(self, part, event) -> None:
        if self.refuse:
            raise PrivacyBudgetExceeded("over the step's bound")
        self.records.append((part, event, self.generator.get_state().clone()))


def test_the_count_is_recorded_as_gaussian_mu_before_its_noise_is_drawn():
    g = torch.Generator().manual_seed(8)
    before = g.get_state().clone()
    meter = _Meter(g)
    mech = GaussianClipCountMechanism(num_users=5, generator=g)
    mech.release_count(3, 0.5, meter=meter, part="clip")
    ((part, event, state),) = meter.records
    assert part == "clip" and event == Gaussian(0.5)
    assert torch.equal(state, before) and not torch.equal(g.get_state(), before)  # recorded, then drawn
    refusing = _Meter(g, refuse=True)
    drawn = g.get_state().clone()
    with pytest.raises(PrivacyBudgetExceeded):
        mech.release_count(3, 0.5, meter=refusing)
    assert torch.equal(g.get_state(), drawn)  # a refused record: nothing drawn


@pytest.mark.parametrize("count", [-1, 6, True, 2.0, "3"])
def test_a_count_outside_0_to_n_is_refused_before_anything_is_recorded_or_drawn(count):
    g = torch.Generator().manual_seed(9)
    before, meter = g.get_state().clone(), _Meter(g)
    mech = GaussianClipCountMechanism(num_users=5, generator=g)
    with pytest.raises(ValueError, match=r"count must be an integer in \[0, n = 5\]"):
        mech.release_count(count, 0.5, meter=meter)
    with pytest.raises(ValueError, match="mu"):
        mech.release_count(3, 0.0, meter=meter)
    assert meter.records == [] and torch.equal(g.get_state(), before)
    with pytest.raises(ValueError, match="num_users"):
        GaussianClipCountMechanism(num_users=0)


def test_released_counts_have_mean_count_and_std_one_over_mu():
    mu, m = 0.4, 1000
    mech = GaussianClipCountMechanism(num_users=50, generator=torch.Generator().manual_seed(10))
    assert mech.noise_std(mu) == 1 / mu and mech.noise_std(math.inf) == 0.0
    released = torch.tensor([mech.release_count(17, mu).count for _ in range(m)], dtype=torch.float64)
    noise = released - 17
    # the sample mean within 5 sd of 0; Σ noise²/σ² ~ χ²_m, so the std within 1 ± 5/√(2m) (≈ 6e-7 each)
    assert abs(float(noise.mean())) < 5 * (1 / mu) / math.sqrt(m)
    assert abs(float(noise.pow(2).mean().sqrt()) * mu - 1) < 5 / math.sqrt(2 * m)
    assert mech.release_count(17, math.inf).count == 17.0  # μ = ∞: the exact count, non-private
