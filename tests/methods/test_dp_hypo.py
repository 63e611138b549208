r"""``botorch_dp.methods.dp_hypo``: the ratio bound kept is the largest of the ladder whose
bound reaches (ε, δ) (the larger ones are refused by the bound itself), the E[K] cap makes the
method unavailable with the reason, and the simulation is the baseline at μ₀ n/n_p."""

import warnings

import pytest
import torch

from botorch_dp.baselines import dp_hypo
from botorch_dp.methods.dp_hypo import RATIO_LADDER
from botorch_dp.plan import DPHyPOMethod, MethodContext, MethodUnavailable
from botorch_dp.privacy.analysis.dp_hypo import dp_hypo_per_trial_mu_for_epsilon

from .method_helpers import narrow_basin

N, N_P = 2000, 200


def _context(config, epsilon, evaluations=6.0):
    return MethodContext(
        bounds=config.bounds,
        num_users=N,
        num_proxy_users=N_P,
        epsilon=epsilon,
        delta=1e-5,
        config=config,
        evaluations=evaluations,
    )


@pytest.mark.parametrize("epsilon", [1.0, 3.0])
def test_the_ratio_bound_is_the_largest_that_reaches_the_budget(epsilon):
    proxy, config = narrow_basin(n_proxy=N_P)
    method = DPHyPOMethod(loss_clip=1.0).resolved(proxy, _context(config, epsilon))
    for ratio in (2.0, *RATIO_LADDER):
        if ratio > method.ratio_bound:  # brute force: every larger ratio cannot reach (ε, δ)
            with pytest.raises(ValueError):
                dp_hypo_per_trial_mu_for_epsilon(
                    target_epsilon=epsilon, target_delta=1e-5, mean_trials=6.0, ratio_upper=ratio
                )
    assert method.per_trial_mu == dp_hypo_per_trial_mu_for_epsilon(
        target_epsilon=epsilon, target_delta=1e-5, mean_trials=6.0, ratio_upper=method.ratio_bound
    )
    assert method.ratio_bound == (1.1 if epsilon == 1.0 else 1.5)


def test_above_the_cap_it_is_unavailable_and_the_simulation_is_the_baseline():
    proxy, config = narrow_basin(n_proxy=N_P)
    with pytest.raises(MethodUnavailable, match="max_mean_trials = 5"):
        DPHyPOMethod(max_mean_trials=5).resolved(proxy, _context(config, 3.0))
    with pytest.raises(MethodUnavailable, match="no density ratio bound"):
        DPHyPOMethod(loss_clip=1.0).resolved(proxy, _context(config, 0.01))
    context = _context(config, 3.0, evaluations=3.0)
    method = DPHyPOMethod(loss_clip=1.0).resolved(proxy, context)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta = method.simulate(proxy, context, 4)
        plain = dp_hypo(
            proxy,
            config.bounds,
            mean_trials=3.0,
            per_trial_mu=method.per_trial_mu * N / N_P,
            loss_clip=1.0,
            ratio_bound=method.ratio_bound,
            target_delta=1e-5,
            refit_every=1,
            density_update_every=1,
            max_points=256,
            seed=4,
        )
    assert torch.equal(theta, plain.theta)
    # n_p proxy users at μ₀ n/n_p draw the score noise C/(n μ₀) of the private run
    assert plain.guarantee.details["noise_std"] == pytest.approx(1.0 / (N * method.per_trial_mu), rel=1e-12)
