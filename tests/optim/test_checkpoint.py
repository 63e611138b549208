import dataclasses
import json
import math
import pickle
import stat

import pytest
import torch
from gpytorch.kernels import MaternKernel, RQKernel, ScaleKernel

from botorch_dp.optim.checkpoint import files as ckpt_files
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.ledger import DPSGDRun, PrivacyBudgetExceeded, PrivacyLedger

from .loop_helpers import nl_config, normal_location, poly_kernel, rbf_kernel


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
    opt.close()  # one owner per directory: the next one resumes once this one is closed
    assert torch.equal(DPGIBO.resume(tmp_path).step_optimizer.state_dict()["state"][0]["sum"], g**2)


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
    assert len(opt.ledger.validation.steps()) == 8
    assert math.isclose(resumed.release.guarantee.mu, 1.0, rel_tol=1e-9)
    assert not list(tmp_path.glob("*.tmp"))


def test_training_runs_in_a_shared_ledger_survive_resume(tmp_path):
    """An objective that trains with DP records runs in the loop's ledger; resume keeps them once."""
    x, losses = normal_location(n=20, d=2)

    def make_objective(ledger):
        def objective(X):
            for row in X:  # one (pretend) DP-SGD training run per evaluated point
                ledger.external.record(
                    DPSGDRun(noise_multiplier=1.1, sample_rate=0.01, steps=100), run_id=repr(row.tolist())
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
    opt.close()
    ledger2 = PrivacyLedger()
    opt = DPGIBO.resume(tmp_path, ledger=ledger2)
    assert opt.ledger is ledger2
    opt.run(make_objective(ledger2), progress=False)  # re-evaluates the pending points
    assert len(ledger2.training.runs()) == len(ref_ledger.training.runs()) == 12
    assert math.isclose(ledger2.training.epsilon(1e-5), ref_ledger.training.epsilon(1e-5))
    assert len(ledger2.validation.steps()) == 4
    with pytest.raises(ValueError, match="budget on the ledger"):
        DPGIBO(nl_config(d=2, validation_mu_budget=1.0), ledger=PrivacyLedger())


# ---------------------------------------------------------------------- safe format
def _run_some(tmp_path, iterations=2, **kw):
    x, objective = normal_location(n=12, d=2)
    cfg = nl_config(d=2, privacy_mu=1.0, num_iterations=6, seed=5, **kw)
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    for _ in range(iterations):
        X = opt.ask()
        opt.tell(X, objective(X))
    return opt, cfg, objective


def test_checkpoint_files_are_private_and_listed(tmp_path):
    opt, _, _ = _run_some(tmp_path / "ck")
    root = tmp_path / "ck"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    files = [p for p in root.rglob("*") if p.is_file()]
    assert {p.relative_to(root).as_posix() for p in files} == {
        "state.json",
        "owner.lock",
        "gp/000002.safetensors",
        "losses/000000.safetensors",
        "losses/000001.safetensors",
    }
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in root.rglob("*") if p.is_dir())
    assert b"pickle" not in (root / "state.json").read_bytes() and not list(root.rglob("*.tmp"))


def test_loss_files_are_written_once(tmp_path):
    opt, _, objective = _run_some(tmp_path, iterations=1)
    first = (tmp_path / "losses" / "000000.safetensors").stat()
    X = opt.ask()
    opt.tell(X, objective(X))
    again = (tmp_path / "losses" / "000000.safetensors").stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))  # creating the file proves the pickle ran


@pytest.mark.parametrize("target", ["state.json", "gp/000002.safetensors", "losses/000001.safetensors"])
def test_crafted_pickle_is_refused_and_runs_no_code(tmp_path, target):
    _run_some(tmp_path / "ck")
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Marker(marker))
    (tmp_path / "ck" / target).write_bytes(payload)
    torch.save({"x": _Marker(marker)}, tmp_path / "ck" / "dp_gibo_checkpoint.pt")  # the old file name
    with pytest.raises(ValueError, match="not valid JSON|damaged or replaced"):
        DPGIBO.resume(tmp_path / "ck")
    assert not marker.exists()


def test_damaged_state_json_is_refused_with_a_reason(tmp_path):
    _run_some(tmp_path)
    path = tmp_path / "state.json"
    good = path.read_text()
    path.write_text(good[: len(good) // 2])
    with pytest.raises(ValueError, match="not valid JSON"):
        DPGIBO.resume(tmp_path)
    doc = json.loads(good)
    cases = [
        ("schema_version", 99, "schema_version"),
        ("format", "something-else", "format"),
        ("iteration", 3, "loss_files"),
        ("batch_sizes", [3, 4], "batch_sizes"),
        ("surprise", 1, "unknown keys"),
    ]
    for key, value, message in cases:
        path.write_text(json.dumps({**doc, key: value}))
        with pytest.raises(ValueError, match=message):
            DPGIBO.resume(tmp_path)
    theta = dict(doc["theta"], hex=[float("nan").hex(), "0x0p+0"])
    path.write_text(json.dumps({**doc, "theta": theta}))
    with pytest.raises(ValueError, match="theta"):
        DPGIBO.resume(tmp_path)
    loss = tmp_path / "losses" / "000000.safetensors"
    data = bytearray(loss.read_bytes())
    data[-1] ^= 1
    path.write_text(good)
    loss.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256"):
        DPGIBO.resume(tmp_path)


# ---------------------------------------------------------------------- atomic tell
def test_failed_checkpoint_write_leaves_tell_undone_and_retry_releases_once(tmp_path, monkeypatch):
    x, objective = normal_location(n=15, d=2)
    cfg = nl_config(d=2, privacy_mu=1.0, num_iterations=4, seed=9, step_rule="adagrad")
    full = DPGIBO(cfg).run(objective, progress=False)

    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    X = opt.ask()
    before = opt.state_dict()
    noise_state = opt.generators.noise.get_state()
    real_write = ckpt_files.write_atomic

    def failing_write(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt_files, "write_atomic", failing_write)
    with pytest.raises(OSError, match="disk full"):
        opt.tell(X, objective(X))
    after = opt.state_dict()
    # the run is rolled back; the ledger is not: the failed tell drew its noise, so its record stays
    without_ledger = lambda meta: json.dumps({k: v for k, v in meta.items() if k != "ledger"}, sort_keys=True)  # noqa: E731
    assert without_ledger(after["meta"]) == without_ledger(before["meta"])
    assert all(torch.equal(a, b) for a, b in zip(after["loss_blocks"], before["loss_blocks"], strict=True))
    assert opt.iteration == 1 and [r.key for r in opt.ledger.validation.records()] == ["step-0000", "step-0001"]
    assert torch.equal(opt.generators.noise.get_state(), noise_state) and torch.equal(opt.ask(), X)
    monkeypatch.setattr(ckpt_files, "write_atomic", real_write)
    opt.tell(X, objective(X))  # the retry releases again (the same seeded noise), and is charged again
    opt.close()
    resumed = DPGIBO.resume(tmp_path).run(objective, progress=False)
    assert torch.equal(resumed.release.released_gradients, full.release.released_gradients)
    assert torch.equal(resumed.release.iterates, full.release.iterates)
    # 4 steps and the failed attempt, each 1/2-GDP: an over-count, never an under-count
    assert len(resumed.release.batch_sizes) == 4 and math.isclose(
        resumed.release.guarantee.mu, math.sqrt(5) / 2, rel_tol=1e-9
    )


def test_unwritable_directory_between_ask_and_tell(tmp_path):
    x, objective = normal_location(n=15, d=2)
    cfg = nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=4)
    full = DPGIBO(cfg).run(objective, progress=False)
    root = tmp_path / "ck"
    opt = DPGIBO(cfg, checkpoint_dir=root)
    X = opt.ask()
    (root / "losses").write_text("not a directory")  # writes under losses/ now fail, even as root
    with pytest.raises(OSError):
        opt.tell(X, objective(X))
    # the run is undone; the release drawn before the failed write stays charged
    assert opt.iteration == 0 and len(opt.ledger.validation.records()) == 1 and torch.equal(opt.ask(), X)
    (root / "losses").unlink()
    result = opt.run(objective, progress=False)
    assert torch.equal(result.release.iterates, full.release.iterates)
    assert len(opt.ledger.validation.records()) == 4
    opt.close()
    assert torch.equal(DPGIBO.resume(root).result().release.iterates, full.release.iterates)


# ---------------------------------------------------------------------- resume checks
def test_resume_refuses_a_changed_run(tmp_path):
    opt, cfg, _ = _run_some(tmp_path)
    opt.close()
    with pytest.raises(ValueError, match="num_iterations"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, num_iterations=12))
    with pytest.raises(ValueError, match="clip_bound"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, clip_bound=3.0))
    with pytest.raises(ValueError, match="kernel"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, kernel=rbf_kernel(2)))
    kernel = poly_kernel()
    kernel.offset = 1.5  # same class, other hyperparameter value
    with pytest.raises(ValueError, match="kernel"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, kernel=kernel))
    same = DPGIBO.resume(tmp_path, cfg)
    assert same.iteration == 2 and same.run_id == opt.run_id
    assert torch.equal(same.theta, opt.theta)


def test_budget_on_resume_can_only_tighten(tmp_path):
    opt, cfg, objective = _run_some(tmp_path, validation_mu_budget=1.0)
    opt.close()
    with pytest.raises(ValueError, match="only be tightened"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, validation_mu_budget=2.0))
    tight = DPGIBO.resume(tmp_path, dataclasses.replace(cfg, validation_mu_budget=0.65))
    assert tight.ledger.validation_mu_budget == 0.65
    with pytest.raises(PrivacyBudgetExceeded):
        tight.ask()  # a third step of 1/√6 would spend 0.707 > 0.65: refused before its batch
    assert tight.iteration == 2 and len(tight.ledger.validation.steps()) == 2
    tight.close()
    again = DPGIBO.resume(tmp_path)  # the resume committed the tightened budget; the refused step is not there
    assert again.ledger.validation_mu_budget == 0.65 and again.iteration == 2


def test_resume_without_config_rebuilds_allow_listed_kernels(tmp_path):
    for kernel in (rbf_kernel(2, 0.7), ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=2)), RQKernel()):
        path = tmp_path / type(kernel).__name__
        opt, cfg, _ = _run_some(path, kernel=kernel)
        opt.close()
        resumed = DPGIBO.resume(path)
        assert type(resumed.config.kernel) is type(kernel)
        assert resumed.state_dict()["meta"] == opt.state_dict()["meta"]
