r"""A DP-GIBO run's state as one immutable object (botorch_dp/optim/state.py): ``RunState`` cannot be
changed in place and each step gives a new one; ``rollback_on_error`` puts a run back exactly as it
was (its state object, the step rule's optimizer, both generators) when the block raises, while the
ledger keeps what was drawn, so the retried step replays the rolled-back one bit for bit."""

import dataclasses
import warnings

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.state import rollback_on_error
from botorch_dp.privacy.seeding import PrivacyWarning

from .loop_helpers import nl_config, normal_location
from .state_helpers import same

D = 2


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def _step(opt, objective):
    X = opt.ask()
    opt.tell(X, objective(X))


def test_each_step_gives_a_new_state_and_none_changes_in_place():
    _, objective = normal_location(n=10, d=D)
    opt = DPGIBO(nl_config(d=D, privacy_mu=1.0, num_iterations=3, step_rule="adagrad", seed=1))
    first = opt.state
    assert first.iteration == 0 and first.released_matrix(D).shape == (0, D) and first.blocks == []
    _step(opt, objective)
    second = opt.state
    assert second is not first and first.iteration == 0 and len(first.iterates) == 1
    assert second.iteration == 1 and len(second.iterates) == 2 and second.released_matrix(D).shape == (1, D)
    assert second.step_records()["step"] == 1 and [b.shape for b in second.blocks] == [(second.batch_sizes[0], 10)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        second.theta = torch.zeros(D)


def _public(opt):
    r"""The run's checkpoint state without its ledger (which a rollback keeps)."""
    state = opt.state_dict()
    return {**state, "meta": {k: v for k, v in state["meta"].items() if k != "ledger"}}


def test_a_rolled_back_step_leaves_the_run_as_it_was_and_its_retry_replays_it():
    _, objective = normal_location(n=10, d=D)
    opt = DPGIBO(nl_config(d=D, privacy_mu=1.0, num_iterations=3, step_rule="adagrad", seed=1))
    _step(opt, objective)
    saved, before = opt.state, _public(opt)
    noise, search = opt.generators.noise.get_state(), opt.generators.search.get_state()
    spent = opt.ledger.validation.mu()
    with pytest.raises(RuntimeError, match="after the step"):
        with rollback_on_error(opt):
            _step(opt, objective)
            theta, released = opt.state.theta.clone(), opt.state.released[-1].clone()
            assert opt.iteration == 2 and not torch.equal(theta, saved.theta)
            raise RuntimeError("after the step")
    assert opt.state is saved and same(_public(opt), before)
    assert torch.equal(opt.generators.noise.get_state(), noise)
    assert torch.equal(opt.generators.search.get_state(), search)
    assert same(opt.step_optimizer.state_dict()["state"], saved.optimizer["state"])
    assert opt.ledger.validation.mu() > spent  # the ledger is never rolled back
    _step(opt, objective)  # the retry draws the same noise from the restored generators
    assert torch.equal(opt.state.theta, theta) and torch.equal(opt.state.released[-1], released)
