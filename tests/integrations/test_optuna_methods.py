r"""Every method of ``tune`` through a private study, chosen as ``tune`` chooses it (issue 44 item 2).

The study calls ``tune`` through its public API with the recorded space: for each method, strategy
and the proxy's method choice, the study releases what a direct ``tune`` call with the same
arguments and seed releases (the same method, the same hyperparameters, the same noisy scores).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from botorch_dp import tune

from .test_optuna import FAST, N, _configs_objective, _losses, _optimize, _study, objective

PROXY_NOISE = torch.randn(N, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * 0.1


def _proxy(trial):  # public users: the same suggest calls, other users
    return objective(trial) + PROXY_NOISE


def _proxy_configs(configs):
    return torch.stack([_losses(c["lr"], 8 + 8 * c["width"], c["act"]) + PROXY_NOISE for c in configs])


def _same_release(study, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = tune(
            _configs_objective, study.space.space, epsilon=3.0, delta=1e-5, seed=3, progress=False, **FAST, **kw
        )
    result = study.result
    assert result.method == direct.method and result.hyperparameters == direct.hyperparameters
    assert [r.noisy_score for r in result.runs] == [r.noisy_score for r in direct.runs]
    assert study.guarantee == direct.guarantee and study.best_params == study.space.to_optuna(direct.hyperparameters)
    assert study.guarantee_report() == direct.guarantee_report()
    return result


def _each(options):
    n_trials = options.pop("max_trials", None)
    calls: list[torch.Tensor] = []
    study = _optimize(_study(**options), lambda trial: objective(trial, calls), n_trials=n_trials)
    result = _same_release(study, **options, **({} if n_trials is None else {"max_trials": n_trials}))
    assert result.method == options.get("method", "dp_gibo") and len(calls) >= (n_trials or 1)


@pytest.mark.parametrize(
    "options",
    [{"method": "private_random_search"}, {"method": "private_random_search", "max_trials": 40}],
    ids=["private_random_search", "padded"],
)
def test_a_selection_releases_what_tune_releases(options):
    _each(options)


@pytest.mark.parametrize(
    "options",
    [{"method": "dp_gibo"}, {"method": "dp_hypo"}, {"strategy": "sample"}],
    ids=["dp_gibo", "dp_hypo", "sample"],
)
def test_each_method_releases_what_tune_releases(options):
    _each(options)


def test_the_method_is_chosen_on_the_proxy_as_tune_chooses_it():
    study = _optimize(_study(proxy=_proxy, num_users=N, plan_budget=12), objective)
    result = _same_release(study, proxy=_proxy_configs, num_users=N, plan_budget=12)
    assert result.methods is not None and study.result.methods == result.methods
