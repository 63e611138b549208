r"""Synthetic users of partitioned runs (``distributed.synthetic``): the losses are the stated closed
form ``s_i ‖θ − c‖² + u_i vᵀ(θ − c)`` of the regenerated data, a recomputation gives the same bits,
the partitions have their own consecutive seeds, and the seed stays out of the repr."""

from __future__ import annotations

import math

import pytest
import torch

from botorch_dp.distributed.synthetic import SyntheticUsers, synthetic_partitions


def test_losses_are_the_closed_form_of_the_regenerated_users():
    users = SyntheticUsers(50, 3, seed=4)
    s, u = users.user_data()
    assert s.shape == u.shape == (50,) and bool(((0.5 <= s) & (s < 1.5)).all()) and bool(((-1 <= u) & (u < 1)).all())
    X = torch.tensor([[0.3, 0.3, 0.3], [1.0, 0.0, -0.5]], dtype=torch.float64)
    losses = users(X)
    assert losses.shape == (2, 50) and losses.dtype == torch.float64
    assert torch.equal(losses[0], torch.zeros(50, dtype=torch.float64))  # at the centre c every loss is 0
    delta = [0.7, -0.3, -0.8]
    for i in (0, 17, 49):  # one user at a time, in plain floats
        expected = float(s[i]) * sum(x * x for x in delta) + float(u[i]) * sum(delta) / math.sqrt(3)
        assert float(losses[1, i]) == pytest.approx(expected, rel=1e-13)
    assert torch.equal(users(X), SyntheticUsers(50, 3, seed=4)(X))  # regenerated, the same bits
    assert torch.equal(users(X.reshape(-1)), losses)  # a flat point list is read as b x d


def test_partitions_have_consecutive_seeds_and_the_repr_hides_them():
    parts = synthetic_partitions([5, 7, 3], dim=2, seed=10)
    assert [p.num_users for p in parts] == [5, 7, 3] and [p.seed for p in parts] == [10, 11, 12]
    assert all(torch.equal(p.user_data()[0], SyntheticUsers(p.num_users, 2, p.seed).user_data()[0]) for p in parts)
    assert not torch.equal(parts[0].user_data()[0], SyntheticUsers(5, 2, 11).user_data()[0])
    assert repr(parts[0]) == "SyntheticUsers(num_users=5, dim=2, seed=...)"
    with pytest.raises(ValueError, match="num_users"):
        SyntheticUsers(0, 2, 1)
    with pytest.raises(ValueError, match="dim"):
        SyntheticUsers(3, 0, 1)
