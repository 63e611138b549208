import math

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.ledger import PrivacyLedger

from .loop_helpers import nl_config, normal_location


def test_state_of_another_version_is_refused(tmp_path):
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=2))
    state = opt.state_dict()
    state["meta"]["version"] = 1
    with pytest.raises(ValueError, match="version"):
        DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=2)).load_state_dict(state)


def test_adagrad_state_is_checkpointed(tmp_path):
    x, objective = normal_location(n=10, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=3, step_rule="adagrad"), checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    g = opt.result().release.released_gradients[0]
    assert torch.equal(DPGIBO.resume(tmp_path)._optimizer.state_dict()["state"][0]["sum"], g**2)


def test_resume_reproduces_uninterrupted_run(tmp_path):
    x, objective = normal_location(n=20, d=3)
    cfg = nl_config(d=3, privacy_mu=1.0, clip_bound=2.0, num_iterations=8, step_rule="adagrad", seed=7)
    full = DPGIBO(cfg).run(objective, progress=False)

    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    opt.run(objective, progress=False, callback=lambda info: info.iteration == 3)
    assert opt.iteration == 3
    # crash after ask() but before tell(): the pending points survive the restart
    pending = opt.ask()
    del opt
    opt = DPGIBO.resume(tmp_path)
    assert opt.iteration == 3
    assert torch.equal(opt.ask(), pending)
    resumed = opt.run(objective, progress=False)
    assert torch.equal(resumed.release.iterates, full.release.iterates)
    assert torch.equal(resumed.release.evaluation_points, full.release.evaluation_points)
    assert resumed.release.batch_sizes == full.release.batch_sizes
    # no step counted twice
    assert len(opt.ledger.validation_steps) == 8
    assert math.isclose(resumed.release.guarantee.mu, 1.0, rel_tol=1e-9)
    assert not list(tmp_path.glob("*.tmp"))


def test_training_runs_in_a_shared_ledger_survive_resume(tmp_path):
    """An objective that trains with DP records runs in the loop's ledger; resume keeps them once."""
    x, losses = normal_location(n=20, d=2)

    def make_objective(ledger):
        def objective(X):
            for row in X:  # one (pretend) DP-SGD training run per evaluated point
                ledger.record_training_run(
                    run_id=repr(row.tolist()), noise_multiplier=1.1, sample_rate=0.01, steps=100
                )
            return losses(X)

        return objective

    cfg = nl_config(d=2, privacy_mu=1.0, clip_bound=2.0, num_iterations=4, seed=3)
    ref_ledger = PrivacyLedger()
    DPGIBO(cfg, ledger=ref_ledger).run(make_objective(ref_ledger), progress=False)

    ledger = PrivacyLedger()
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path, ledger=ledger)
    opt.run(make_objective(ledger), progress=False, callback=lambda info: info.iteration == 2)
    X = opt.ask()
    make_objective(ledger)(X)  # evaluated (and trained) but the process dies before tell()
    ledger2 = PrivacyLedger()
    opt = DPGIBO.resume(tmp_path, ledger=ledger2)
    assert opt.ledger is ledger2
    opt.run(make_objective(ledger2), progress=False)  # re-evaluates the pending points
    assert len(ledger2.training_runs) == len(ref_ledger.training_runs) == 12
    assert math.isclose(ledger2.training_epsilon(1e-5), ref_ledger.training_epsilon(1e-5))
    assert len(ledger2.validation_steps) == 4
    with pytest.raises(ValueError, match="budget on the ledger"):
        DPGIBO(nl_config(d=2, privacy_budget_mu=1.0), ledger=PrivacyLedger())
