r"""Tests of the ``PerUserProblem`` interface that every problem shares (objectives/per_user_problem.py and
problems/__init__.py): shapes, determinism per seed, the registry, local generators, and the
observation noise (one draw per point, shared by every user)."""

from __future__ import annotations

import math

import pytest
import torch

from botorch_dp.problems import PROBLEMS, NormalLocation, PerUserProblem, get_problem

DTYPES = (torch.float, torch.double)


def _small(name: str, **kwargs) -> PerUserProblem:
    small = {
        "normal_location": {},
        "huber": {},
        "gp_regression": {"dim": 3, "n_total": 120},
        "svm": {"n_train": 60, "n_val": 40, "num_features": 5},
    }[name]
    return get_problem(name, **{**small, **kwargs})


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_interface_shapes_and_determinism(name):
    problem = _small(name, seed=3)
    d, n = problem.dim, problem.num_users
    assert problem.bounds.shape == (2, d) and problem.bounds.dtype == torch.double
    assert problem.name == name
    theta0 = problem.default_theta0()
    assert theta0.shape == (d,)
    assert bool(((theta0 >= problem.bounds[0]) & (theta0 <= problem.bounds[1])).all())
    for dtype in DTYPES:
        X = problem.sample_in_bounds(4, seed=0).to(dtype)
        Y = problem(X)
        assert Y.shape == (4, n) and Y.dtype == torch.double
        assert torch.isfinite(Y).all()
        assert problem(X[0]).shape == (1, n)
        assert problem(X.view(2, 2, d)).shape == (2, 2, n)
        assert problem.objective(X).shape == (4,)
        torch.testing.assert_close(problem.objective(X), Y.mean(dim=-1))
    # Same seed -> same data and losses; another seed -> other data.
    X = problem.sample_in_bounds(2, seed=1)
    torch.testing.assert_close(_small(name, seed=3)(X), problem(X), rtol=0, atol=0)
    assert not torch.allclose(_small(name, seed=4)(X), problem(X))
    with pytest.raises(ValueError):
        problem(torch.zeros(2, d + 1))


def test_get_problem_unknown():
    with pytest.raises(ValueError, match="Unknown problem"):
        get_problem("nope")


def test_sample_in_bounds_does_not_touch_global_rng():
    problem = NormalLocation()
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    problem.sample_in_bounds(5, seed=1)
    NormalLocation(seed=7)(torch.zeros(2, 5))
    torch.testing.assert_close(torch.rand(3), expected)


def test_observation_noise_shared_across_users_with_stated_std():
    sigma = 0.3
    problem = NormalLocation(seed=0, observation_noise_std=sigma)
    X = torch.rand(20000, 5, dtype=torch.double, generator=torch.Generator().manual_seed(1))
    residual = problem(X) - problem.evaluate_true(X)
    # One draw per evaluated point, shared by every user.
    torch.testing.assert_close(residual, residual[:, :1].expand_as(residual))
    eps = residual[:, 0]
    # std error of the sample std is sigma / sqrt(2 * 20000) ~ 0.5 %.
    assert abs(eps.std().item() - sigma) < 0.03 * sigma
    assert abs(eps.mean().item()) < 4 * sigma / math.sqrt(20000)
    # The mean loss then has noise sigma as well (Appendix E.5: f + λZ).
    assert abs((problem(X).mean(-1) - problem.objective(X)).std().item() - sigma) < 0.03 * sigma
    # Reproducible per seed; the noise stream differs from the data stream.
    first = NormalLocation(seed=0, observation_noise_std=sigma)(X[:10])
    torch.testing.assert_close(NormalLocation(seed=0, observation_noise_std=sigma)(X[:10]), first)
    assert not torch.allclose(NormalLocation(seed=1, observation_noise_std=sigma)(X[:10]), first)
    unit = NormalLocation(seed=0, observation_noise_std=1.0)
    noise_draw = unit(X[:1]) - unit.evaluate_true(X[:1])
    data_draw = problem.data[0, 0] - problem.true_location[0]
    assert not torch.isclose(noise_draw[0, 0], data_draw)
    assert problem.objective(X[:3]).shape == (3,)  # the diagnostic is noise free
    torch.testing.assert_close(problem.objective(X[:3]), problem.evaluate_true(X[:3]).mean(-1))
