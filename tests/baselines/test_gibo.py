"""Tests for botorch_dp.baselines.gibo: GIBO is DP-GIBO with μ = ∞."""

from __future__ import annotations

import math

import pytest
import torch

from botorch_dp.baselines import from_dp_gibo_result, gibo
from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.problems import NormalLocation


def test_gibo_wrapper_equals_dp_gibo_with_infinite_mu():
    problem = NormalLocation(dim=2, num_users=20, seed=1)
    kwargs = dict(
        num_iterations=3,
        clip_bound=5.0,
        step_size=0.3,
        batch_size=3,
        seed=4,
        theta0=problem.default_theta0(),
        raw_samples=16,
        num_restarts=1,
    )
    res = gibo(problem, problem.bounds, kernel=problem.recommended_kernel(), **kwargs)
    ref = DPGIBO(
        DPGIBOConfig(bounds=problem.bounds, kernel=problem.recommended_kernel(), privacy_mu=math.inf, **kwargs)
    ).run(problem, progress=False)
    assert res.guarantee is None
    assert torch.equal(res.theta, ref.release.theta)
    assert torch.equal(res.history.iterates, ref.release.iterates)
    assert res.num_evaluations == 9
    assert res.history.evaluations.tolist() == [0, 3, 6, 9]
    with pytest.raises(TypeError):
        gibo(problem, problem.bounds, kernel=problem.recommended_kernel(), privacy_mu=1.0)


def test_from_dp_gibo_result_keeps_the_guarantee():
    problem = NormalLocation(dim=2, num_users=20, seed=1)
    config = DPGIBOConfig(
        bounds=problem.bounds,
        kernel=problem.recommended_kernel(),
        num_iterations=2,
        privacy_mu=0.5,
        clip_bound=1.0,
        batch_size=2,
        raw_samples=16,
        num_restarts=1,
    )
    res = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
    assert res.guarantee.mu == pytest.approx(0.5)
    assert res.guarantee.epsilon == pytest.approx(gdp_epsilon(0.5, 1e-5))
    assert res.history.public
