r"""DP-GIBO per configuration, then a private choice by Gaussian scores (``methods.enumerate``): the
procedure's ``μ`` is the exact Gaussian composition ``√(K μ_run² + K μ_score²)`` (closed form; the
ledger's records give the same), the scores are charged as one ``Gaussian(μ_score √K)`` part before
they are drawn and the lowest noisy score wins, and the final losses are refused when malformed.
The old ``tuning.method_enumerate`` interface is tested in tests/tuning/test_method_enumerate.py."""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import torch

from botorch_dp.methods.enumerate import SCORE_PART, EnumerateMethod, final_losses
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from tests.optim.loop_helpers import nl_config

N = 30
LEVELS = {"a": 0.2, "b": 0.8}  # each configuration's loss level (the clip C = 1 leaves them unclipped)


class _Levels:
    r"""A ``ConfigurationObjective``: configuration ``c`` has losses ``level_c + 0.05 (θ − x_i)²`` (n users)."""

    def __init__(self) -> None:
        self.x = torch.linspace(-0.5, 0.5, N, dtype=torch.float64)

    def bound(self, configuration):
        level = LEVELS[configuration["c"]]
        return lambda X: level + 0.05 * (X[:, :1] - self.x) ** 2

    def encode(self, theta, configuration):
        return theta


def _method(run_mu=0.5, score_mu=0.7, K=2, **kw) -> EnumerateMethod:
    configurations = tuple({"c": c} for c in list(LEVELS)[:K])
    config = nl_config(d=1, privacy_mu=run_mu, num_iterations=1, batch_size=2, clip_bound=1.0)
    return EnumerateMethod(configurations, (config,) * K, score_mu, 1.0, **kw)


def test_the_procedures_mu_is_the_exact_gaussian_composition():
    assert _method(0.5, 0.7).gdp_mu == pytest.approx(math.sqrt(2 * 0.5**2 + 2 * 0.7**2), rel=1e-15)
    assert _method(0.5, 0.7, K=1).gdp_mu == pytest.approx(0.5, rel=1e-15)  # one configuration: no scores
    assert _method(0.5, 0.7, budget_mu=2.0).gdp_mu == 2.0
    with pytest.raises(ValueError, match="one config per configuration, got 1 for 2"):
        EnumerateMethod(({"c": "a"}, {"c": "b"}), (_method().configs[0],), 0.7, 1.0)


def test_malformed_final_losses_are_refused_before_the_choice():
    theta = torch.zeros(1, dtype=torch.float64)
    assert final_losses(lambda X: torch.zeros(1, N, dtype=torch.float64), theta, N, "x").shape == (1, N)
    with pytest.raises(ValueError, match=r"shape \(1, 29\) at the end, expected \(1, 30\)"):
        final_losses(lambda X: torch.zeros(1, N - 1, dtype=torch.float64), theta, N, "the end")
    with pytest.raises(ValueError, match="non-finite losses at the end; nothing was released"):
        final_losses(lambda X: torch.full((1, N), math.nan, dtype=torch.float64), theta, N, "the end")


def test_a_private_run_charges_the_composition_and_the_lowest_noisy_score_wins():
    ledger = PrivacyLedger()
    method = _method(0.5, 0.7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        run = method.run_private(_Levels(), ledger=ledger, seed=3)
    assert run.mu == pytest.approx(method.gdp_mu, rel=1e-12) and len(run.runs) == 2
    score_records = [r for r in ledger.validation.records() if r.key.endswith(SCORE_PART)]
    assert [r.event for r in score_records] == [Gaussian(0.7 * math.sqrt(2))]  # both scores, one part
    scores = [r.noisy_score for r in run.runs]
    assert run.chosen == min(range(2), key=scores.__getitem__) and run.score_mu == 0.7
    # each score is the [0, C]-clipped mean loss at its run's released θ plus N(0, (C/(n μ_score))²)
    sd = 1.0 / (N * 0.7)
    for r, s in zip(run.runs, scores, strict=True):
        theta = r.result.release.theta.reshape(1, -1)
        clean = float(_Levels().bound(r.configuration)(theta).clamp(0.0, 1.0).mean())
        assert abs(s - clean) < 6 * sd  # a false failure has probability about 2e-9
    sharp = dataclasses.replace(method, score_mu=1e4)  # negligible score noise: configuration a wins
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        assert sharp.run_private(_Levels(), ledger=PrivacyLedger(), seed=4).configuration == {"c": "a"}
