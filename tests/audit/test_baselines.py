"""The baselines' score rows (botorch_dp/audit/baselines.py) read their claim from each run's guarantee."""

import pytest

from botorch_dp.audit.baselines import audit_dp_hypo_score, audit_score_release


@pytest.mark.parametrize("audit", [audit_score_release, audit_dp_hypo_score])
def test_the_claim_is_the_guarantees_per_trial_mu(audit):
    result = audit(num_runs=400, per_trial_mu=0.5, seed=2)
    assert result.claimed_mu == 0.5
    assert result.empirical_mu_lower <= 0.5
