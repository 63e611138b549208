"""The AMP row (botorch_dp/audit/amp.py): runs are fit_amp calls; the claim is the run's privacy
profile; a dropped objective perturbation is caught."""

import math

import pytest

from botorch_dp.audit.amp import amp_design, audit_amp_release
from botorch_dp.privacy.analysis.objective_perturbation import amp_epsilon
from botorch_dp.privacy.mechanisms import ObjectivePerturbationMechanism


def mu_lin(config):
    return config.clip / math.sqrt(config.sigma**2 + config.lam**2 * config.sigma_out**2)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_amp_row_is_sound_and_its_claim_is_the_runs_profile(loss):
    result = audit_amp_release(num_runs=3000, loss=loss, seed=6)
    config, _, _ = amp_design(epsilon=4.0, delta=1e-5, loss=loss, clip=0.1, sigma_out=0.015, tau=5e-5)
    assert result.mechanism == "amp_release" and result.delta == 1e-5
    assert result.claimed_epsilon == pytest.approx(amp_epsilon(1e-5, **config.privacy_parameters), rel=1e-12)
    assert result.empirical_mu_lower <= result.claimed_mu
    assert result.empirical_epsilon_lower <= result.claimed_epsilon
    # the claimed curve lies above this design's exact μ_lin, not absurdly far
    assert mu_lin(config) < result.claimed_mu < 1.8 * mu_lin(config)


def test_a_dropped_objective_perturbation_is_caught(monkeypatch):
    draw = ObjectivePerturbationMechanism.perturbation
    monkeypatch.setattr(ObjectivePerturbationMechanism, "perturbation", lambda self, **kw: 0.0 * draw(self, **kw))
    result = audit_amp_release(num_runs=2000, seed=7)  # only the output noise is left: μ = C/σ_out ≈ 6.7
    assert result.empirical_mu_lower > result.claimed_mu


def test_the_design_refuses_an_unclipped_record():
    with pytest.raises(ValueError, match="clip"):
        audit_amp_release(num_runs=100, clip=1.5)
