r"""The low-order bits of a release carry nothing about the statistic (issue 40, item 1).

The attack (Mironov 2012; Jin et al. 2022): with the statistic exactly ``0`` on ``D`` and
``m′ ≠ 0`` on a neighbour ``D′``, a float release ``fl(m′ + fl(σZ))`` with ``|y| < m′/2`` is an
exact sum, a multiple of ``ulp(m′)/2``, while on ``D`` small outputs carry finer bits: the event
"``|y| < m′/2`` and ``y`` not a multiple of ``ulp(m′)/2``" has probability 0 on ``D′`` and
about 0.14 on ``D`` for a score at ``μ₀ = 1`` (0.01 at ``μ₀ = 0.09``). Every release now is
``γ (M + k)`` on a public grid ``γ`` far coarser than ``ulp(m′)``: the event never fires, on
either side, for the score mechanism, ``DPGIBO.tell``'s gradients, ``tune``'s released
scores (read from ``to_json``) and AMP's released model (objective perturbation). Each test
also checks that every released value is a multiple of the grid computed from public
quantities, which continuous float noise fails at once.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

from botorch_dp import DPGIBO, DPGIBOConfig, tune
from botorch_dp.privacy.analysis.discrete_gaussian import calibrate_discrete_gaussian
from botorch_dp.privacy.analysis.objective_perturbation import amp_output_grid
from botorch_dp.privacy.mechanisms import (
    GaussianGradientMechanism,
    GaussianScoreMechanism,
    ObjectivePerturbationMechanism,
)
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from tests.optim.loop_helpers import poly_kernel

pytestmark = pytest.mark.privacy_fast  # the fast version of privacy properties (tests/conftest.py)


def attack_fires(y: torch.Tensor, m_prime: float) -> int:
    r"""How many releases ``y`` satisfy ``|y| < m′/2`` and are not multiples of ``ulp(m′)/2``."""
    y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
    return int(((y.abs() < m_prime / 2) & (torch.fmod(y, math.ulp(m_prime) / 2) != 0)).sum())


def on_grid(y: torch.Tensor, grid: float) -> bool:
    y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
    return bool((torch.fmod(y, grid) == 0).all())


def test_the_event_fires_on_continuous_float_noise():
    # the detector itself: fl(0 + σZ) fires (D), fl(m′ + σZ) never does (D′)
    g = torch.Generator().manual_seed(0)
    m_prime, z = 0.01, torch.randn(20_000, generator=g, dtype=torch.float64) * 0.01
    assert attack_fires(z, m_prime) > 1000
    assert attack_fires(m_prime + z, m_prime) == 0


def test_score_mechanism_never_fires_on_either_side():
    n, C, q, mu0 = 100, 1.0, 4000, 1.0
    mech = GaussianScoreMechanism(loss_clip=C, per_trial_mu=mu0)  # OS entropy, as by default
    zeros = torch.zeros(q, n, dtype=torch.float64)
    neighbour = zeros.clone()
    neighbour[:, 0] = C  # m′ = C/n
    grid = calibrate_discrete_gaussian(sensitivity=C / n, mu=mu0, dim=1, magnitude_bound=C).grid
    for losses in (zeros, neighbour):
        scores = mech.release(losses).scores
        assert on_grid(scores, grid)
        assert attack_fires(scores, C / n) == 0
        assert int((scores.abs() < C / n / 2).sum()) > 100  # the event's first half happens often


def test_tell_gradients_never_fire(monkeypatch):
    d, T, n, B, mu = 4, 12, 50, 1.0, 10.0
    released = []
    release_sum = GaussianGradientMechanism.release_sum

    def spy(self, summed, **kwargs):
        out = release_sum(self, summed, **kwargs)
        released.append(out.gradient.clone())
        return out

    monkeypatch.setattr(GaussianGradientMechanism, "release_sum", spy)
    config = DPGIBOConfig(
        bounds=torch.tensor([[-2.0] * d, [4.0] * d], dtype=torch.float64),
        kernel=poly_kernel(),
        num_iterations=T,
        privacy_mu=mu,
        clip_bound=B,
        step_size=0.5,
        batch_size=2,
        theta0=torch.zeros(d, dtype=torch.float64),
        search_radius=0.5,
        num_restarts=1,
        raw_samples=16,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = DPGIBO(config)
        for _ in range(T):
            X = opt.ask()
            opt.tell(X, torch.zeros(X.shape[0], n, dtype=torch.float64))  # the clipped mean is exactly 0
    gradients = torch.stack(released)
    grid = calibrate_discrete_gaussian(sensitivity=2 * B / n, mu=mu / math.sqrt(T), dim=d, magnitude_bound=B).grid
    assert gradients.shape == (T, d) and on_grid(gradients, grid)
    assert attack_fires(gradients, B / n) == 0  # a neighbour with one user at B e_j has m′_j = B/n


def test_tune_released_scores_never_fire():
    N, C = 300, 1.0
    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Categorical("opt", ["a", "b", "c"])])
    scores = []
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = tune(
                lambda configs: torch.zeros(len(configs), N, dtype=torch.float64),  # every score is exactly 0
                space,
                epsilon=2.0,
                delta=1e-5,
                progress=False,
                loss_clip=C,
                num_iterations=1,
                raw_samples=8,
                num_restarts=1,
            )
        scores += [c["noisy_score"] for c in json.loads(result.to_json())["configurations"]]
    assert len(scores) == 6
    # the grid is at least 2^-24 σ, and σ = C/(n μ_score) > 2^-9 here: every score is a multiple of 2^-33
    assert on_grid(torch.tensor(scores, dtype=torch.float64), 2.0**-33)
    assert attack_fires(torch.tensor(scores, dtype=torch.float64), C / N) == 0


def test_amp_release_never_fires_on_either_side():
    # AMP's θ̃ is 0 on D and m′ in every coordinate on D′ (the τ test passes: zero gradient); each
    # coordinate is one trial of the attack. With θ̃ + σ_out Z in float64 the event fires on D for
    # about 79 % of the coordinates (|σ_out Z| < 1/8); on the grid it never does.
    d, m_prime, sigma_out = 1000, 0.3, 0.1
    grid = amp_output_grid(dim=d, sigma_out=sigma_out)  # public: d and σ_out only
    assert grid >= math.ulp(m_prime) / 2 and grid <= 2.0**-14 * sigma_out
    for centre, small in ((0.0, 500), (m_prime, 30)):  # expected about 870 and 67
        mech = ObjectivePerturbationMechanism(  # OS entropy, as by default
            dim=d, clip=1.0, beta=0.5, lam=2.0, sigma=1.0, tau=1e-3, sigma_out=sigma_out
        )
        mech.perturbation()
        theta_tilde = torch.full((d,), centre, dtype=torch.float64)
        theta = mech.release(theta_tilde, lambda t: torch.zeros(d, dtype=torch.float64)).theta
        assert on_grid(theta, grid)
        assert attack_fires(theta, m_prime) == 0
        assert int((theta.abs() < m_prime / 2).sum()) > small  # the event's first half happens often
        # the noise has the stated scale: sample std within 12 % (5 standard errors) of σ_out
        assert abs(float((theta - theta_tilde).std()) / sigma_out - 1.0) < 0.12
