r"""A DP-GIBO run's state as its checkpoint stores it (botorch_dp/optim/run_state.py): the encoded
state, through JSON, restores a fresh run to the same state, which then continues bit for bit as the
original; a damaged field is refused naming it with nothing changed; a ledger's budget on resume may
only tighten the stored one, and a config is rebuilt from the checkpoint when none is given."""

import copy
import json
import warnings

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.run_state import apply_state, budget_of_ledger_state, encode_state, resume_config
from botorch_dp.optim.stored_config import config_to_json
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning

from .loop_helpers import nl_config, normal_location
from .state_helpers import same

D = 2


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def _config(**kw):
    return nl_config(d=D, privacy_mu=1.0, num_iterations=4, step_rule="adagrad", seed=2, **kw)


def _stepped(config, steps=2):
    _, objective = normal_location(n=10, d=D)
    opt = DPGIBO(config)
    for _ in range(steps):
        X = opt.ask()
        opt.tell(X, objective(X))
    return opt, objective


def _through_json(state):
    return {**state, "meta": json.loads(json.dumps(state["meta"]))}


def test_the_encoded_state_restores_a_fresh_run_that_continues_bit_for_bit():
    opt, objective = _stepped(_config(validation_mu_budget=2.0))
    state = _through_json(encode_state(opt))
    fresh = DPGIBO(_config(validation_mu_budget=2.0))
    apply_state(fresh, state)
    assert same(encode_state(fresh)["meta"], encode_state(opt)["meta"])
    assert fresh.run_id == opt.run_id and fresh.ledger.validation.mu() == opt.ledger.validation.mu()
    for run in (opt, fresh):
        X = run.ask()
        run.tell(X, objective(X))
    assert torch.equal(fresh.state.theta, opt.state.theta) and same(fresh.state.released, opt.state.released)


def test_the_non_private_diagnostics_survive_the_encoded_state_bit_for_bit():
    opt, _ = _stepped(_config(record_non_private_diagnostics=True))
    fresh = DPGIBO(_config(record_non_private_diagnostics=True))
    apply_state(fresh, _through_json(encode_state(opt)))
    pairs = list(zip(fresh.state.diagnostics, opt.state.diagnostics, strict=True))
    assert len(pairs) == 2 and all(torch.equal(a.unnoised_gradient, b.unnoised_gradient) for a, b in pairs)
    assert [(a.clip_fraction, a.noise_norm) for a, _ in pairs] == [(b.clip_fraction, b.noise_norm) for _, b in pairs]


@pytest.mark.parametrize(
    ("field", "damage", "match"),
    [
        ("iteration", 99, r"'iteration' must be an integer in \[0, 4\], got 99"),
        ("run_id", "not-a-uuid", "'run_id' must be a uuid4 hex string"),
        ("version", 0, "Checkpoint state version 0"),
        ("batch_sizes", [3], "batch_sizes"),
    ],
)
def test_a_damaged_field_is_refused_naming_it_and_nothing_changes(field, damage, match):
    opt, _ = _stepped(_config())
    state = _through_json(encode_state(opt))
    state["meta"][field] = damage
    fresh = DPGIBO(_config())
    before, run_id = fresh.state, fresh.run_id
    with pytest.raises(ValueError, match=match):
        apply_state(fresh, state)
    assert fresh.state is before and fresh.run_id == run_id and fresh.ledger.records() == []


def test_a_ledgers_budget_on_resume_may_only_tighten_and_a_missing_config_is_rebuilt():
    r"""(A config's budget on resume, through the checkpoint directory: test_checkpoint.py.)"""
    opt, _ = _stepped(_config(validation_mu_budget=2.0), steps=1)
    state = _through_json(encode_state(opt))
    assert budget_of_ledger_state(state["meta"]["ledger"]) == 2.0
    rebuilt, budget = resume_config(state, None, None)
    assert config_to_json(rebuilt) == config_to_json(opt.config) and budget == 2.0
    assert resume_config(state, None, PrivacyLedger(validation_mu_budget=1.2))[1] == 1.2
    with pytest.raises(ValueError, match=r"=3.0 on resume is looser than the checkpoint's budget 2.0"):
        resume_config(copy.deepcopy(state), None, PrivacyLedger(validation_mu_budget=3.0))
