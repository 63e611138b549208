r"""``tuning.sampled``: the old import path of ``methods.sampled`` (the same objects) and its old entry
point ``sample_configurations``, whose trials are the caller's ``run_one``: each called quietly at
``μ_run = μ₀ √(1 − f)`` with a fresh ledger of its own, the caller's ledger charged once for the
whole selection, and the released configuration one of the trials'. The selection itself (the
number of trials, the scores) is tested in tests/methods/test_sampled.py."""

from __future__ import annotations

import math
import types
import warnings

import pytest
import torch

from botorch_dp.methods import sampled as sampled_method
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace, sampled
from botorch_dp.tuning.tune_result import ConfigurationRun

SPACE = SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True), Categorical("arm", (0, 1, 2))])
N = 30
MU0 = 0.5


def test_the_old_path_gives_the_methods_objects():
    assert sampled.SampledMethod is sampled_method.SampledMethod and sampled.SAMPLE_PART is sampled_method.SAMPLE_PART
    assert set(sampled.__all__) == {"SAMPLE_PART", "SampledMethod", "sample_configurations"}


def _losses(configs):
    return torch.stack([torch.full((N,), 1.0 + c["arm"], dtype=torch.float64) for c in configs])


def test_each_trial_is_run_one_at_the_run_share_of_mu_with_a_ledger_of_its_own(monkeypatch):
    monkeypatch.setattr(sampled_method, "per_trial_mu_for_epsilon", lambda **kw: MU0)  # not under test here
    config = DPGIBOConfig(bounds=SPACE.bounds, kernel=SPACE.recommended_kernel(), privacy_mu=1.0)
    calls = []

    def run_one(choice, run_mu, seed, ledger, quiet=False):
        calls.append((dict(choice), run_mu, ledger, quiet))
        theta = torch.full((SPACE.dim,), 0.5, dtype=torch.float64)
        return ConfigurationRun(
            choice, types.SimpleNamespace(release=types.SimpleNamespace(theta=theta)), "r", N, config
        )

    caller = PrivacyLedger()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        result = sampled.sample_configurations(
            _losses, SPACE, run_one, epsilon=3.0, delta=1e-5, ledger=caller, mean_trials=4.0,
            selection_share=0.2, loss_clip=5.0, seed=7, progress=False,
        )  # fmt: skip
    assert len(calls) >= 1
    for choice, run_mu, ledger, quiet in calls:
        assert choice in list(SPACE.configurations()) and quiet is True
        assert run_mu == pytest.approx(MU0 * math.sqrt(1 - 0.2), rel=1e-15)  # the run's share of μ₀²
        assert isinstance(ledger, PrivacyLedger) and ledger is not caller and ledger.validation.records() == []
    assert {"arm": result.hyperparameters["arm"]} in [c for c, *_ in calls]  # the released one was a trial
    centre = SPACE.to_natural(torch.full((1, SPACE.dim), 0.5, dtype=torch.float64), choice={"arm": 0})[0]
    assert result.hyperparameters["lr"] == pytest.approx(centre["lr"], rel=1e-12)  # every trial ended at the centre
    assert len(caller.validation.records()) >= 1  # the selection is charged to the caller's ledger
