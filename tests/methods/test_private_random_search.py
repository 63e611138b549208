r"""``botorch_dp.methods.private_random_search``: the resolved settings are their closed forms (μ₀ from
the selection bound, C the proxy's loss quantile, E[K] DP-GIBO's evaluations), the simulation is the
baseline at μ₀ n/n_p and draws the private noise C/(n μ₀), and the private run is charged its
whole (ε, δ) curve before the objective is called."""

import warnings

import pytest
import torch
from torch.quasirandom import SobolEngine

from botorch_dp.baselines import private_random_search
from botorch_dp.plan import MethodContext, MethodUnavailable, PrivateRandomSearchMethod, proxy_loss_clip
from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon, private_selection_rdp
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger
from botorch_dp.privacy.ledger.filters import PrivacyBudgetExceeded

from .method_helpers import narrow_basin

N, N_P = 2000, 200


@pytest.fixture(scope="module")
def setting():
    proxy, config = narrow_basin(n_proxy=N_P)
    context = MethodContext(
        bounds=config.bounds, num_users=N, num_proxy_users=N_P, epsilon=1.0, delta=1e-5, config=config, evaluations=18.0
    )
    return proxy, context, PrivateRandomSearchMethod().resolved(proxy, context)


def test_resolved_settings_are_their_closed_forms(setting):
    proxy, context, method = setting
    assert method.mean_trials == 18.0 and method.epsilon == 1.0 and method.delta == 1e-5
    # μ₀ of the selection bound, lowered (by under 0.1 %) until the ledger's grid conversion is within ε too
    continuous = per_trial_mu_for_epsilon(target_epsilon=1.0, target_delta=1e-5, mean_trials=18.0)
    assert continuous * (1 - 1e-3) < method.per_trial_mu <= continuous
    curve = [private_selection_rdp(a, per_trial_mu=method.per_trial_mu, mean_trials=18.0) for a in TRAINING_RDP_ORDERS]
    assert 1.0 - 1e-9 < rdp_curve_epsilon(curve, TRAINING_RDP_ORDERS, 1e-5)[0] <= 1.0
    unit = SobolEngine(2, scramble=True, seed=0).draw(32, dtype=torch.float64)
    assert method.loss_clip == float(torch.quantile(proxy(unit).reshape(-1), 0.95))  # bounds are the unit square
    assert PrivateRandomSearchMethod(mean_trials=5.0, loss_clip=0.5).resolved(None, context).loss_clip == 0.5
    with pytest.raises(ValueError, match="loss_clip is needed without a proxy"):
        PrivateRandomSearchMethod().resolved(None, context)
    with pytest.raises(MethodUnavailable, match="need C > 0"):
        proxy_loss_clip(lambda X: -proxy(X), context.bounds)
    with pytest.raises(ValueError, match="resolve it first"):
        PrivateRandomSearchMethod().simulate(proxy, context, 0)


def test_the_simulation_is_the_baseline_at_the_scaled_budget_and_draws_the_private_noise(setting):
    proxy, context, method = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta = method.simulate(proxy, context, 3)
        plain = private_random_search(
            proxy,
            context.bounds,
            mean_trials=18.0,
            per_trial_mu=method.per_trial_mu * N / N_P,
            loss_clip=method.loss_clip,
            target_delta=1e-5,
            seed=3,
        )
    assert torch.equal(theta, plain.theta)
    # the proxy's n_p users at μ₀ n/n_p: the noise the private run's n users at μ₀ draw
    assert plain.guarantee.details["noise_std"] == pytest.approx(
        method.loss_clip / (N * method.per_trial_mu), rel=1e-12
    )


def test_the_private_run_charges_the_full_budget_before_the_objective(setting):
    _, context, method = setting
    private, _ = narrow_basin(n_proxy=N)
    calls = []

    def counted(X):
        calls.append(X.shape[0])
        return private(X)

    with pytest.raises(PrivacyBudgetExceeded):
        method.run_private(counted, ledger=PrivacyLedger(validation_mu_budget=0.1))
    assert calls == []
    ledger = PrivacyLedger()
    run = method.run_private(counted, ledger=ledger)  # noise from OS entropy
    assert run.num_users == N and run.run_id == ledger.validation.records()[0].run_id
    assert run.release is run and run.released_score == run.result.released_score
    assert not hasattr(run.result, "num_evaluations") and not hasattr(run.result, "history")  # the winner only
    assert run.epsilon <= ledger.validation.epsilon(1e-5) <= 1.0  # the run's continuous-order bound and the ledger's
    assert ledger.validation.epsilon(1e-5) == pytest.approx(1.0, rel=1e-9)
    # seeded: the objective is called for the K trials exactly, and the release is the baseline's winner
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = method.run_private(counted, ledger=PrivacyLedger(), seed=8)
        trials = private_random_search(
            private,
            context.bounds,
            mean_trials=18.0,
            per_trial_mu=method.per_trial_mu,
            loss_clip=method.loss_clip,
            target_delta=1e-5,
            seed=8,
            non_private_trials=True,  # the NON-PRIVATE diagnostic: K and every trial
        )
    assert sum(calls) == trials.num_evaluations and torch.equal(run.theta, trials.theta)
    assert run.released_score == trials.history.extras["released_score"] == trials.released_score
