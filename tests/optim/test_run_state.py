r"""A DP-GIBO run's state as its checkpoint stores it (botorch_dp/optim/run_state.py): the encoded
state, through JSON, restores a fresh run to the same state, which then continues bit for bit as the
original; a damaged field is refused naming it with nothing changed; a ledger's budget on resume may
only tighten the stored one, and a config is rebuilt from the checkpoint when none is given."""

import copy
import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from botorch_dp.optim.checkpoint import STATE_FILE
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.run_state import (
    STATE_VERSION,
    apply_state,
    budget_of_ledger_state,
    encode_state,
    migrate_state_meta,
    resume_config,
)
from botorch_dp.optim.stored_config import config_to_json
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning

from . import version3_runs
from .loop_helpers import nl_config, normal_location
from .state_helpers import same

STORED = Path(__file__).resolve().parents[1] / "data" / "checkpoints"

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
        ("strategies", {"clip": {}}, r"'strategies': missing keys \['batches', 'fitting'"),
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


def _private_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:  # git keeps no modes: owner-only, as a checkpoint must be
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    return target


@pytest.mark.parametrize("name", sorted(version3_runs.STOPPED_AT))
def test_a_version_3_checkpoint_resumes_through_the_one_migration_to_the_uninterrupted_run(tmp_path, name):
    r"""``tests/data/checkpoints/v3_<name>`` (written by commit 64cb0e9 with the per-family keys
    ``adaptive_clip``, ``noise_and_selection`` and ``subspace``; ``tests/optim/version3_runs.py``): the
    migration puts each key's values under its family in ``strategies`` exactly as today's strategies
    write them (compared with a checkpoint written now at the same step), and the resumed run ends as
    an uninterrupted run of the same config does today, bit for bit."""
    stored = json.loads((STORED / f"v3_{name}" / STATE_FILE).read_text())
    assert stored["version"] == 3 and {"adaptive_clip", "noise_and_selection", "subspace"} <= set(stored)
    config, objective, steps = version3_runs.config(name), version3_runs.objective, version3_runs.STOPPED_AT[name]
    migrated = migrate_state_meta(stored)
    assert migrated["version"] == STATE_VERSION and not {"adaptive_clip", "noise_and_selection", "subspace"} & set(
        migrated
    )
    now = DPGIBO(config, checkpoint_dir=tmp_path / "now")
    now.run(objective, progress=False, callback=None if steps is None else lambda info: info.iteration == steps)
    written = json.loads((tmp_path / "now" / STATE_FILE).read_text())
    now.close()
    assert migrated["strategies"] == written["strategies"]
    assert any(written["strategies"].values())  # each run keeps some strategy's state
    full = DPGIBO(config).run(objective, progress=False).release
    for given in (None, config):
        with DPGIBO.resume(_private_copy(STORED / f"v3_{name}", tmp_path / f"copy-{given is None}"), given) as opt:
            release = opt.run(objective, progress=False).release
        assert torch.equal(release.iterates, full.iterates) and torch.equal(release.theta, full.theta)
        assert same(release.records, full.records)


def test_the_migration_checks_each_old_key_and_leaves_other_versions_alone():
    assert migrate_state_meta({"version": STATE_VERSION, "x": 1}) == {"version": STATE_VERSION, "x": 1}
    old = {"version": 3, "adaptive_clip": {"bounds": [], "counts": []}, "noise_and_selection": None, "subspace": None}
    assert migrate_state_meta(old)["strategies"]["clip"] == {} and migrate_state_meta(old)["partitioned_users"] is None
    with pytest.raises(ValueError, match=r"'adaptive_clip': missing keys \['counts'\], unknown keys \['count'\]"):
        migrate_state_meta({**old, "adaptive_clip": {"bounds": [], "count": []}})
