"""tune refuses before spending (issue 43, item 1): δ ≥ 1/n and a noise-dominated budget are refused
before any objective call when n is known (num_users=, a TorchModelTuningObjective), at the first call
before any release otherwise; each refusal names the argument, its value, the threshold and the opt-in,
and with the opt-in the result's report and JSON carry the warning. Misspelled settings get a "did you
mean" (item 8)."""

import json
import math
import re
import warnings

import pytest
import torch

from botorch_dp import tune
from botorch_dp.optim.public_checks import NOISE_DOMINATED_RATIO
from botorch_dp.privacy.analysis.gdp import gdp_epsilon, gdp_mu
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace, TorchModelTuningObjective

FAST = dict(raw_samples=16, num_restarts=1, num_iterations=2, progress=False, seed=5)
SPACE = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Hyperparameter("wd", 0.0, 1.0)])
MIXED = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Categorical("opt", ("sgd", "adam"))])


class Counted:
    r"""configurations ↦ ``q x n`` losses, counting calls."""

    def __init__(self, n: int):
        self.n, self.calls = n, 0
        self.noise = torch.rand(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def __call__(self, configs):
        self.calls += 1
        return torch.stack([(math.log10(c["lr"]) + 2.5) ** 2 / 4 + self.noise for c in configs])


def test_delta_at_least_one_over_n_is_refused_before_any_call_when_n_is_known():
    objective, ledger = Counted(300), PrivacyLedger()
    with pytest.raises(ValueError) as caught:
        tune(objective, SPACE, epsilon=1.0, delta=0.01, num_users=300, ledger=ledger, **FAST)
    message = str(caught.value)
    assert objective.calls == 0 and ledger.validation.records() == []
    assert "delta = 0.01 is at least 1/n = 0.00333 (n = 300 users), the threshold" in message
    assert "unsafe_allow_large_delta=True" in message
    # just below 1/n: no refusal, no warning
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*1/n", category=PrivacyWarning)
        result = tune(objective, SPACE, epsilon=1.0, delta=0.9 / 300, num_users=300, **FAST)
    assert result.cautions == () and "WARNING" not in result.guarantee_report()
    assert json.loads(result.to_json())["warnings"] == []


def test_without_n_the_first_call_refuses_before_any_release():
    # DP-GIBO; DP-GIBO per configuration and a choice; a selection method (no DP-GIBO run to check it)
    for space, kw in ((SPACE, {}), (MIXED, dict(method="dp_gibo")), (SPACE, dict(method="private_random_search"))):
        objective, ledger = Counted(300), PrivacyLedger()
        with pytest.raises(ValueError, match=r"delta = 0\.5 is at least 1/n = 0\.00333 \(n = 300 users\)"):
            tune(objective, space, epsilon=1.0, delta=0.5, ledger=ledger, **FAST, **kw)
        assert objective.calls == 1
        # DP-GIBO records nothing before its first release; a selection charges its whole curve up front
        assert ledger.validation.records() == [] or kw.get("method") == "private_random_search"


def test_the_opt_in_runs_and_the_result_says_so_in_its_report_and_json():
    objective = Counted(300)
    with pytest.warns(PrivacyWarning, match=r"is at least 1/n.*unsafe_allow_large_delta=True"):
        result = tune(objective, SPACE, epsilon=1.0, delta=0.01, unsafe_allow_large_delta=True, **FAST)
    (caution,) = result.cautions
    assert caution.startswith("delta = 0.01 is at least 1/n = 0.00333 (n = 300 users)")
    assert f"WARNING: {caution}" in result.guarantee_report()
    assert json.loads(result.to_json())["warnings"] == [caution]
    assert objective.calls > 0 and result.ledger.validation.records()


def test_a_noise_dominated_budget_is_refused_before_any_call_with_the_epsilon_it_needs():
    # ε = 0.01, δ = 1e-5, 20 users, k = 2: R = 2√2/(20 μ) = 34.5 ≥ 10
    objective = Counted(20)
    with pytest.raises(ValueError) as caught:
        tune(objective, SPACE, epsilon=0.01, delta=1e-5, num_users=20, **FAST)
    message = str(caught.value)
    mu = gdp_mu(0.01, 1e-5)
    ratio = 2 * math.sqrt(2) / (20 * mu)
    needed = gdp_epsilon(mu * ratio / NOISE_DOMINATED_RATIO, 1e-5)
    assert objective.calls == 0
    assert "epsilon = 0.01 leaves the run noise-dominated" in message
    assert f"= {ratio:.3g} times" in message and f"threshold {NOISE_DOMINATED_RATIO:g}" in message
    assert f"needs epsilon above {needed:.4g}" in message and "allow_noise_dominated=True" in message
    # just above the needed ε it runs; the opt-in runs the refused one and says so
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune(Counted(20), SPACE, epsilon=needed * 1.01, delta=1e-5, num_users=20, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(Counted(20), SPACE, epsilon=0.01, delta=1e-5, allow_noise_dominated=True, **FAST)
    assert len(result.cautions) == 1 and "noise-dominated" in result.cautions[0]
    assert "WARNING: epsilon = 0.01 leaves the run noise-dominated" in result.guarantee_report()
    assert json.loads(result.to_json())["warnings"] == list(result.cautions)


def test_a_noise_dominated_choice_among_configurations_is_refused_with_its_own_ratio():
    # a tiny selection share: the runs carry signal, the scores do not (R = 1/(n μ √(f/K)))
    mu, n, share = 0.005, 300, 0.001
    epsilon = gdp_epsilon(mu, 1e-5)
    ratio = 1 / (n * mu * math.sqrt(share / 2))
    assert ratio >= NOISE_DOMINATED_RATIO > 2 * math.sqrt(1) / (n * mu * math.sqrt((1 - share) / 2))
    objective = Counted(n)
    with pytest.raises(ValueError, match=re.escape(f"noisy validation score (mu = {mu * math.sqrt(share / 2):.3g}")):
        tune(
            objective, MIXED, epsilon=epsilon, delta=1e-5, num_users=n, selection_share=share, method="dp_gibo", **FAST
        )
    assert objective.calls == 0


def test_a_selection_method_is_held_to_the_whole_budget_bound():
    objective = Counted(20)
    with pytest.raises(ValueError, match=r"a noisy validation score \(mu = 0\.0041 Gaussian DP or less"):
        tune(objective, SPACE, epsilon=0.01, delta=1e-5, num_users=20, method="private_random_search", **FAST)
    assert objective.calls == 0


def _torch_objective(**kw):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (70,), generator=g)
    X = torch.randn(70, 3, generator=g, dtype=torch.float64) + y[:, None]
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True)])
    training = TrainingConfig(epochs=1, batch_size=10, seed=0, hidden_sizes=(4,))
    return TorchModelTuningObjective((X[:50], y[:50], X[50:], y[50:]), space, training=training, **kw), space


def test_a_torch_objective_is_refused_before_it_trains():
    objective, space = _torch_objective()  # 20 validation users: 1/n = 0.05
    with pytest.raises(ValueError, match=r"delta = 0\.05 is at least 1/n = 0\.05 \(n = 20 users\)"):
        tune(objective, space, epsilon=1.0, delta=0.05, **FAST)
    assert objective.num_trainings == 0


def test_a_dp_trained_torch_objective_is_refused_for_its_training_records_before_it_trains():
    # DP-trained: 50 training records, 1/50 = 0.02 ≤ δ < 1/20: refused for the training records
    with pytest.warns(PrivacyWarning, match="noise seed"):
        dp, space = _torch_objective(dp_sgd=DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0), noise_seed=0)
    with pytest.raises(ValueError, match=r"delta = 0\.03 is at least 1/n = 0\.02 \(n = 50 training records\)"):
        tune(dp, space, epsilon=1.0, delta=0.03, **FAST)
    assert dp.num_trainings == 0 and dp.ledger.training.runs() == {}
    with pytest.warns(PrivacyWarning, match="noise seed"):
        target, space = _torch_objective(
            dp_sgd=DPSGDConfig(target_epsilon=2.0, target_delta=0.04, planned_runs=20, max_grad_norm=1.0), noise_seed=0
        )
    with pytest.raises(ValueError, match=r"dp_sgd target_delta = 0\.04 is at least 1/n = 0\.02"):
        tune(target, space, epsilon=1.0, delta=1e-5, **FAST)
    assert target.num_trainings == 0


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(num_iteration=3), r"unknown setting num_iteration=3\. Did you mean 'num_iterations'\?"),
        (dict(clip_bund=1.0), r"Did you mean 'clip_bound'\?"),
        (dict(selection_shar=0.2), r"Did you mean 'selection_share'\?"),
        (dict(strategy="enumerat"), r"strategy must be one of .*Did you mean 'enumerate'\?"),
        (dict(method="dp-gibo"), r"method must be one of .*Did you mean 'dp_gibo'\?"),
        (dict(step_rule="adagrd"), r"step_rule must be one of .*Did you mean 'adagrad'\?"),
        (dict(noise_schedule="adaptive"), r"Did you mean 'adaptive_norm'\?"),
    ],
)
def test_a_misspelled_setting_is_refused_with_the_closest_name_before_any_call(kw, match):
    objective = Counted(50)
    with pytest.raises(ValueError, match=match):
        tune(objective, SPACE, epsilon=1.0, delta=1e-5, **{**FAST, **kw})
    assert objective.calls == 0


def test_a_name_far_from_every_setting_gets_no_suggestion():
    with pytest.raises(ValueError) as caught:
        tune(Counted(50), SPACE, epsilon=1.0, delta=1e-5, zzzzzz=1, **FAST)
    assert "unknown setting zzzzzz=1." in str(caught.value) and "Did you mean" not in str(caught.value)
