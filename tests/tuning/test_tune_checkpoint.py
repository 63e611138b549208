"""tune(..., checkpoint_dir=...) (issue 30, item 2): an interrupted call, called again with the same
arguments, resumes: finished configurations are not re-run, their releases neither re-drawn nor
re-charged, and the ledger ends with an uninterrupted call's records; other arguments are refused
by name before anything runs."""

import math
import os
import warnings

import pytest
import torch

from botorch_dp import DPGIBO, tune
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace
from botorch_dp.tuning.tune_checkpoint import ARGUMENTS_FILE, SELECTION_FILE, TuneCheckpoint

N = 120
FAST = dict(raw_samples=16, num_restarts=1, num_iterations=3)
SPACE = SearchSpace(
    [
        Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
        Integer("width", 16, 128),
        Categorical("optimizer", ["sgd", "adam"]),
    ]
)
_NOISE = torch.randn(N, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1


class Interrupted(Exception):
    pass


class Objective:
    """Per-user losses of the configurations; raises on call number ``fail_at`` (1-based) if given."""

    def __init__(self, fail_at=None):
        self.calls, self.fail_at = 0, fail_at

    def __call__(self, configs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise Interrupted(f"call {self.calls}")
        rows = [
            0.2 * ((math.log10(c["lr"]) + 2.5) ** 2 + ((c["width"] - 64) / 64) ** 2 + (c["optimizer"] == "sgd"))
            + _NOISE
            for c in configs
        ]
        return torch.stack(rows).clamp(min=0)


def _tune(objective, directory, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tune(
            objective,
            SPACE,
            **{"epsilon": 3.0, "delta": 1e-5, "progress": False, "checkpoint_dir": directory, **FAST, **kw},
        )


def _records(result):
    """The ledger's records, per side in the order made, each validation run id replaced by its place (runs
    in order, then the choice); training run ids are kept (numbered from the ledger, the same on resume)."""
    names = {r.run_id: f"configuration-{k}" for k, r in enumerate(result.runs)}
    records = [
        (rec.side, rec.run_id if rec.side == "training" else names.get(rec.run_id, "choice"), rec.key, rec.event)
        for rec in result.ledger.records()
    ]
    return sorted(records, key=lambda r: r[0])  # stable: a merge may interleave the two sides differently


@pytest.mark.parametrize("fail_at", [2, 5])  # inside configuration 0's run; inside configuration 1's run
def test_an_interrupted_call_resumes_to_the_uninterrupted_result_and_records(tmp_path, fail_at):
    full = _tune(Objective(), tmp_path / "full", seed=7)
    with pytest.raises(Interrupted):
        _tune(Objective(fail_at=fail_at), tmp_path / "cut", seed=7)
    again = Objective()
    resumed = _tune(again, tmp_path / "cut", seed=7)
    # one call per step of each run and one per scored final point: the finished steps are not evaluated again
    assert again.calls == 2 * FAST["num_iterations"] + 2 - (fail_at - 1)
    for a, b in zip(full.runs, resumed.runs, strict=True):
        assert torch.equal(a.result.release.theta, b.result.release.theta) and a.noisy_score == b.noisy_score
    assert resumed.hyperparameters == full.hyperparameters and resumed.chosen == full.chosen
    assert _records(resumed) == _records(full)  # the same mechanisms recorded once each, none lost
    assert resumed.guarantee == full.guarantee and str(resumed.statement) == str(full.statement)


def test_finished_runs_and_the_choice_are_read_back_not_redrawn(tmp_path):
    # no seed: the noise comes from OS entropy, so anything drawn again would differ
    with pytest.raises(Interrupted):
        _tune(Objective(fail_at=2 * FAST["num_iterations"] + 1), tmp_path)  # at the first score's evaluation
    stored = [DPGIBO.resume(tmp_path / f"configuration-{k:03d}").result().release for k in range(2)]
    again = Objective()
    first = _tune(again, tmp_path)
    assert again.calls == 2  # only the two final points, for the scores
    assert all(torch.equal(r.result.release.theta, s.theta) for r, s in zip(first.runs, stored, strict=True))
    assert os.path.exists(tmp_path / SELECTION_FILE)
    third = Objective()
    second = _tune(third, tmp_path)  # a finished call: everything read back, nothing evaluated or drawn
    assert third.calls == 0
    assert [r.noisy_score for r in second.runs] == [r.noisy_score for r in first.runs]
    assert _records(second) == _records(first) and len(second.ledger.records()) == 2 * FAST["num_iterations"] + 1
    assert second.hyperparameters == first.hyperparameters


def test_other_arguments_are_refused_by_name_before_anything_runs(tmp_path):
    _tune(Objective(), tmp_path, seed=7)
    before = sorted(os.listdir(tmp_path))
    for kw, names in [
        ({"epsilon": 2.0}, "epsilon"),
        ({"step_size": 0.1}, "settings.step_size"),
        ({"seed": 8}, "seed"),
        ({"seed": None}, "seed"),
        ({"selection_share": 0.2}, "selection_share"),
        ({"num_iterations": 4}, "settings.num_iterations"),
    ]:
        objective = Objective()
        with pytest.raises(ValueError, match=rf"other arguments: {names} differ"):
            _tune(objective, tmp_path, **{"seed": 7, **kw})
        assert objective.calls == 0
    other = SearchSpace(
        [
            Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
            Integer("width", 16, 64),
            Categorical("optimizer", ["sgd", "adam"]),
        ]
    )
    with warnings.catch_warnings(), pytest.raises(ValueError, match=r"other arguments: space differ"):
        warnings.simplefilter("ignore")
        tune(Objective(), other, epsilon=3.0, delta=1e-5, seed=7, progress=False, checkpoint_dir=tmp_path, **FAST)
    assert sorted(os.listdir(tmp_path)) == before


def test_a_foreign_or_open_directory_and_the_sampled_strategy_are_refused(tmp_path):
    (tmp_path / "foreign").mkdir(mode=0o700)
    (tmp_path / "foreign" / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"is not empty .* holds no tune.json"):
        _tune(Objective(), tmp_path / "foreign")
    (tmp_path / "open").mkdir(mode=0o755)
    os.chmod(tmp_path / "open", 0o755)
    with pytest.raises(ValueError, match="accessible to group or others"):
        _tune(Objective(), tmp_path / "open")
    with pytest.raises(ValueError, match=r"checkpoint_dir=.*strategy='sample' is not checkpointed"):
        _tune(Objective(), tmp_path / "new", strategy="sample")
    assert not (tmp_path / "new").exists()


def test_the_stored_arguments_hold_no_seed_and_a_damaged_choice_is_refused(tmp_path):
    _tune(Objective(), tmp_path, seed=123456789)
    text = (tmp_path / ARGUMENTS_FILE).read_text()
    assert "123456789" not in text and os.stat(tmp_path / ARGUMENTS_FILE).st_mode & 0o777 == 0o600
    (tmp_path / SELECTION_FILE).write_text('{"scores": ["0x1p+0"], "selection_id": "x", "ledger": {}}')
    with pytest.raises(ValueError, match=r"holds 1 scores for 2 configurations"):
        _tune(Objective(), tmp_path, seed=123456789)
    checkpoint = TuneCheckpoint.__new__(TuneCheckpoint)
    checkpoint.directory = tmp_path
    assert checkpoint.run_dir(1) == tmp_path / "configuration-001" and checkpoint.has_run(1)


# ---------------------------------------------------------------- a torch objective with DP-SGD
TORCH_SPACE = SearchSpace(
    [Hyperparameter("lr", 1e-3, 1e-1, log_scale=True), Categorical("activation", ["relu", "tanh"])]
)


def _torch_objective(fail_at=None):
    from torch import nn

    from botorch_dp.training import DPSGDConfig, TrainingConfig
    from botorch_dp.tuning import TorchModelTuningObjective

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (70,), generator=g)
    X = torch.randn(70, 4, generator=g, dtype=torch.float64) + 1.5 * y[:, None]
    built = []

    def model_fn(activation):
        built.append(activation)
        if len(built) == fail_at:
            raise Interrupted(f"training {len(built)}")
        return nn.Sequential(
            nn.Linear(4, 3), {"relu": nn.ReLU, "tanh": nn.Tanh}[activation](), nn.Linear(3, 2)
        ).double()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the explicit DP-SGD noise seed (reproductions only)
        objective = TorchModelTuningObjective(
            (X[:40], y[:40], X[40:], y[40:]),
            TORCH_SPACE,
            model_fn=model_fn,
            optimizer=torch.optim.SGD,
            training=TrainingConfig(epochs=1, batch_size=10),
            dp_sgd=DPSGDConfig(noise_multiplier=1.5),
            noise_seed=1,
        )
    return objective, built


def test_a_dp_sgd_objective_resumes_in_a_new_process_with_every_training_charged_once(tmp_path):
    def run(objective, directory):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tune(
                objective,
                TORCH_SPACE,
                epsilon=2.0,
                delta=1e-5,
                seed=5,
                progress=False,
                checkpoint_dir=directory,
                protect="validation",  # DP-GIBO, every training run charged on its own (checkpointed)
                raw_samples=16,
                num_restarts=1,
                num_iterations=2,
            )

    full_objective, full_built = _torch_objective()
    full = run(full_objective, tmp_path / "full")
    cut_at = len(full_built) - 3  # a training of configuration 1's last batch (the last 2 are the scores)
    cut, _ = _torch_objective(fail_at=cut_at)
    with pytest.raises(Interrupted):
        run(cut, tmp_path / "cut")
    fresh, built = _torch_objective()  # a new process: a new objective, a new in-memory ledger
    resumed = run(fresh, tmp_path / "cut")
    for a, b in zip(full.runs, resumed.runs, strict=True):
        assert torch.equal(a.result.release.theta, b.result.release.theta) and a.noisy_score == b.noisy_score
    # configuration 0 is not trained again; the lost batch and the scores are
    assert len(built) < len(full_built) and built == full_built[len(full_built) - len(built) :]
    assert [(r.run_id, r.event) for r in resumed.ledger.training.records()] == [
        (r.run_id, r.event) for r in full.ledger.training.records()
    ]
    assert _records(resumed) == _records(full)
    assert resumed.statement.training.epsilon == full.statement.training.epsilon
    assert resumed.statement.composed.epsilon == full.statement.composed.epsilon


def test_a_planned_call_resumes_its_runs_with_the_stored_planned_settings(tmp_path):
    proxy_calls = []

    def proxy(configs):  # PUBLIC users: the same losses on other noise
        proxy_calls.append(len(configs))
        noise = torch.randn(80, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.1
        return torch.stack([(row[:80] - _NOISE[:80] + noise).clamp(min=0) for row in Objective()(configs)])

    plan = dict(
        proxy=proxy,
        plan_budget=None,
        num_users=N,
        seed=7,
        method="dp_gibo",  # the method choice is not checkpointed
        plan_options=dict(clip_quantiles=(0.5, 0.9), step_sizes=(0.2,), num_repeats=1, fit_kernel=False),
    )
    full = _tune(Objective(), tmp_path / "full", **plan)
    with pytest.raises(Interrupted):
        _tune(Objective(fail_at=FAST["num_iterations"] + 2), tmp_path / "cut", **plan)  # inside configuration 1
    proxy_calls.clear()
    resumed = _tune(Objective(), tmp_path / "cut", **plan)
    assert proxy_calls == []  # both runs resumed from their checkpoints: nothing planned again
    assert all(r.plan is None for r in resumed.runs) and all(r.plan is not None for r in full.runs)
    for a, b in zip(full.runs, resumed.runs, strict=True):
        assert b.config.clip_bound == a.plan.config.clip_bound and b.config.step_size == a.plan.config.step_size
        assert torch.equal(a.result.release.theta, b.result.release.theta) and a.noisy_score == b.noisy_score
    assert _records(resumed) == _records(full)


def test_a_tune_checkpoint_written_before_the_config_held_strategies_resumes(tmp_path):
    r"""``tests/data/checkpoints/tune_flat_settings`` was written by the code before issue 42 (commit
    ffb4f19: ``_tune(Objective(fail_at=1), directory)``, interrupted at the first evaluation): its
    ``tune.json`` stores the run settings as flat option fields and configuration 0 a DP-GIBO
    checkpoint of that schema. The same call resumes it (the flat settings are read as the
    strategies' specs); other settings are still refused by name."""
    import shutil
    from pathlib import Path

    source = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "tune_flat_settings"
    directory = tmp_path / "old"
    shutil.copytree(source, directory)
    for path in (directory, *directory.rglob("*")):
        path.chmod(0o700 if path.is_dir() else 0o600)
    with pytest.raises(ValueError, match=r"settings\.clip differ"):
        _tune(Objective(), directory, clip_bound=3.0)
    objective = Objective()
    result = _tune(objective, directory)
    assert objective.calls > 0 and result.guarantee.epsilon == pytest.approx(3.0, rel=1e-9)
