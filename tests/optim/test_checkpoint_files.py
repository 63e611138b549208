r"""The checkpoint directory as a file-system object (issue 28, item 5).

A new run never takes over a directory that holds a checkpoint; no write or read follows a
symbolic link; the directory must belong to the user and be closed to group and others;
every kernel the library and its examples build resumes exactly without ``config=`` (the
loop of docs/getting-started.md also in a fresh process); a checkpoint written before these checks (schema
version 1) still resumes; and the stored ``config_fingerprint`` is compared on resume.
"""

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.objectives.search_space import Hyperparameter, SearchSpace
from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint.lock import LOCK_FILE, CheckpointInUseError
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.problems import NormalLocation

from .loop_helpers import nl_config, normal_location, rbf_kernel

ROOT = Path(__file__).resolve().parents[2]
#: A checkpoint written by the code of commit 1d7e655 (before this file's checks): the loop
#: example (then in the README, now in docs/getting-started.md) with ``seed=11``, stopped after
#: two iterations.
V1_CHECKPOINT = ROOT / "tests" / "data" / "checkpoints" / "v1_readme_loop"


def _run(directory, iterations=2, **kw):
    _, objective = normal_location(n=12, d=2)
    cfg = nl_config(d=2, privacy_mu=1.0, num_iterations=6, seed=5, **kw)
    opt = DPGIBO(cfg, checkpoint_dir=directory)
    for _ in range(iterations):
        X = opt.ask()
        opt.tell(X, objective(X))
    return opt, cfg, objective


def _contents(root: Path) -> dict[str, bytes]:
    r"""The checkpoint's files (the owner's lock file aside: each owner writes its name there)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }


def _loop_example() -> str:
    r"""The first python block under "A first private run" in docs/getting-started.md."""
    text = (ROOT / "docs" / "getting-started.md").read_text("utf-8")
    match = re.search(r"^## A first private run\n[^#]*?^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert match, "docs/getting-started.md has no python block under 'A first private run'"
    return match.group(1)


def _loop_setup() -> tuple[str, str]:
    r"""The loop example's lines before the config (imports, problem) and the config itself."""
    code = _loop_example()
    assert 'checkpoint_dir="ckpt"' in code and "DPGIBO.resume" not in code
    before_config, rest = code.split("config = DPGIBOConfig(", 1)
    config = "config = DPGIBOConfig(" + rest.split("opt = DPGIBO(", 1)[0]
    return before_config, config


# ---------------------------------------------------------------------- 1. no take-over
def test_a_new_run_refuses_a_directory_that_holds_a_checkpoint(tmp_path):
    root = tmp_path / "ck"
    opt, cfg, _ = _run(root)
    before = _contents(root)
    with pytest.raises(CheckpointInUseError, match=f"{root} is in use by a DPGIBO of this process"):  # opt owns it
        DPGIBO(cfg, checkpoint_dir=root)
    opt.close()
    with pytest.raises(ValueError, match=r"DPGIBO\.resume") as err:
        DPGIBO(cfg, checkpoint_dir=root)
    assert str(root) in str(err.value)
    assert _contents(root) == before  # the checkpoint and its ledger are untouched
    resumed = DPGIBO.resume(root)  # resume itself is not refused
    assert resumed.iteration == 2 and resumed.run_id == opt.run_id and len(resumed.ledger.validation.steps()) == 2
    # an empty directory and a missing one are fine
    (tmp_path / "empty").mkdir(mode=0o700)
    DPGIBO(cfg, checkpoint_dir=tmp_path / "empty").ask()
    DPGIBO(cfg, checkpoint_dir=tmp_path / "missing" / "ck").ask()
    assert (tmp_path / "empty" / ckpt.STATE_FILE).is_file() and (
        tmp_path / "missing" / "ck" / ckpt.STATE_FILE
    ).is_file()


def test_a_checkpoint_committed_after_construction_is_not_replaced(tmp_path):
    root = tmp_path / "ck"
    late = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=6, seed=5), checkpoint_dir=root)  # no checkpoint yet
    with pytest.raises(CheckpointInUseError):  # another run is refused the directory late owns ...
        _run(root)
    _run(tmp_path / "other")[0].close()
    shutil.copytree(tmp_path / "other", root, dirs_exist_ok=True)  # ... but a copy that ignores the lock lands
    before = _contents(root)
    with pytest.raises(ValueError, match=r"DPGIBO\.resume"):
        late.ask()  # its first save
    assert _contents(root) == before and late.iteration == 0 and late.state.pending is None
    late.close()
    assert DPGIBO.resume(root).iteration == 2


def test_the_first_save_works_where_hard_links_do_not(tmp_path, monkeypatch):
    r"""A file system without hard links: the first commit checks, then renames."""

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    opt, cfg, _ = _run(tmp_path / "ck", iterations=1)
    opt.close()
    assert DPGIBO.resume(tmp_path / "ck").iteration == 1 and not list((tmp_path / "ck").rglob("*.tmp"))
    late = DPGIBO(cfg, checkpoint_dir=tmp_path / "other")
    _run(tmp_path / "elsewhere")[0].close()
    shutil.copytree(tmp_path / "elsewhere", tmp_path / "other", dirs_exist_ok=True)  # lands while late owns it
    with pytest.raises(ValueError, match=r"DPGIBO\.resume"):
        late.ask()
    assert not list((tmp_path / "other").rglob("*.tmp"))


# ---------------------------------------------------------------------- 2. no symbolic links
def test_symlinks_planted_at_the_old_temporary_names_are_not_followed(tmp_path):
    root = tmp_path / "ck"
    opt, _, objective = _run(root, iterations=1)
    outside = {
        name: tmp_path / f"outside-{i}"
        for i, name in enumerate(["state.json.tmp", "gp/000002.safetensors.tmp", "losses/000001.safetensors.tmp"])
    }
    for name, target in outside.items():
        target.write_text("not the checkpoint's")
        (root / name).symlink_to(target)
    X = opt.ask()
    opt.tell(X, objective(X))  # writes state.json, gp/000002 and losses/000001
    assert all(target.read_text() == "not the checkpoint's" for target in outside.values())
    assert not (root / ckpt.STATE_FILE).is_symlink()
    opt.close()
    assert DPGIBO.resume(root).iteration == 2
    assert not [p for p in root.rglob("*.tmp") if not p.is_symlink()]  # no temporaries of ours left


@pytest.mark.parametrize(
    "name", ["", "state.json", "gp", "losses", "gp/000002.safetensors", "losses/000001.safetensors"]
)
def test_a_symlinked_part_of_a_checkpoint_is_refused_on_read(tmp_path, name):
    root = tmp_path / "ck"
    _run(root)
    path = root / name if name else root
    aside = tmp_path / "aside"
    path.rename(aside)
    path.symlink_to(aside)
    with pytest.raises(ValueError, match="symbolic link") as err:
        DPGIBO.resume(root)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("name", ["", "state.json", "gp", "losses"])
def test_a_symlinked_part_of_a_checkpoint_is_refused_on_write(tmp_path, name):
    root = tmp_path / "ck"
    opt, _, objective = _run(root, iterations=1)
    path = root / name if name else root
    aside = tmp_path / "aside"
    path.rename(aside)
    path.symlink_to(aside)
    before = _contents(aside) if aside.is_dir() else aside.read_bytes()
    with pytest.raises(ValueError, match="symbolic link") as err:
        opt.ask()
    assert str(path) in str(err.value)
    assert (_contents(aside) if aside.is_dir() else aside.read_bytes()) == before
    assert opt.state.pending is None  # the failed ask left no trace


@pytest.mark.parametrize("name", ["gp/000002.safetensors", "losses/000001.safetensors"])
def test_a_symlink_at_the_name_of_a_new_file_is_refused(tmp_path, name):
    root = tmp_path / "ck"
    opt, _, objective = _run(root, iterations=1)
    X = opt.ask()
    target = tmp_path / "outside"
    target.write_text("not the checkpoint's")
    (root / name).symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link") as err:
        opt.tell(X, objective(X))
    assert str(root / name) in str(err.value)
    assert target.read_text() == "not the checkpoint's" and opt.iteration == 1
    (root / name).unlink()
    opt.tell(X, objective(X))  # the retry releases once
    opt.close()
    assert DPGIBO.resume(root).iteration == 2


def test_a_new_run_refuses_a_symlinked_directory(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ValueError, match="symbolic link") as err:
        DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=6), checkpoint_dir=link)
    assert str(link) in str(err.value) and not list(real.iterdir())


# ---------------------------------------------------------------------- 2. a private directory
@pytest.mark.parametrize("mode", [0o750, 0o705, 0o720, 0o701])
def test_a_checkpoint_directory_open_to_others_is_refused(tmp_path, mode):
    root = tmp_path / "ck"
    opt, cfg, _ = _run(root, iterations=1)
    os.chmod(root, mode)
    before = _contents(root)
    for attempt in (lambda: DPGIBO.resume(root), opt.ask, lambda: DPGIBO(cfg, checkpoint_dir=root)):
        with pytest.raises(ValueError, match=re.escape(oct(mode))) as err:
            attempt()
        assert str(root) in str(err.value)
    assert _contents(root) == before and opt.state.pending is None
    os.chmod(root, 0o700)
    opt.close()
    assert DPGIBO.resume(root).iteration == 1
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    with pytest.raises(ValueError, match="group or others"):  # an existing, empty one too
        DPGIBO(cfg, checkpoint_dir=shared)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="changing a directory's owner needs root")
def test_a_checkpoint_directory_of_another_user_is_refused(tmp_path):
    root = tmp_path / "ck"
    opt, cfg, _ = _run(root, iterations=1)
    os.chown(root, 54321, -1)
    for attempt in (lambda: DPGIBO.resume(root), opt.ask, lambda: DPGIBO(cfg, checkpoint_dir=root)):
        with pytest.raises(ValueError, match="owned by user 54321") as err:
            attempt()
        assert str(root) in str(err.value)
    os.chown(root, os.geteuid(), -1)
    opt.close()
    assert DPGIBO.resume(root).iteration == 1


# ---------------------------------------------------------------------- 3. kernels resume without config
class _DefaultKernelProblem(PerUserProblem):
    r"""A problem that keeps ``PerUserProblem.recommended_kernel`` (the paper's RBF, length-scales 1)."""

    def evaluate_true(self, X: torch.Tensor) -> torch.Tensor:
        return X.new_zeros(X.shape[0], self.num_users)


def _set(kernel, dtype, **values):
    r"""``kernel`` in ``dtype`` with the given hyperparameters set (as a user would)."""
    kernel = kernel.to(dtype)
    for name, value in values.items():
        owner = kernel.base_kernel if name == "lengthscale" and isinstance(kernel, ScaleKernel) else kernel
        setattr(owner, name, torch.as_tensor(value, dtype=dtype))
    return kernel


KERNELS = {
    "rbf_ard_float32": lambda: rbf_kernel(2, 0.7),
    "rbf_ard_float64": lambda: _set(RBFKernel(ard_num_dims=2), torch.float64, lengthscale=[[0.3, 1.7]]),
    "matern_float32": lambda: _set(MaternKernel(nu=2.5), torch.float32, lengthscale=0.4),
    "matern_float64": lambda: _set(MaternKernel(nu=1.5, ard_num_dims=2), torch.float64, lengthscale=[[0.45, 0.8]]),
    "scale_matern_float32": lambda: _set(
        ScaleKernel(MaternKernel(nu=2.5)), torch.float32, lengthscale=0.5, outputscale=1.7
    ),
    "scale_matern_float64": lambda: _set(
        ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=2)), torch.float64, lengthscale=[[0.6, 0.35]], outputscale=2.3
    ),
    "search_space_recommended": lambda: SearchSpace(
        [Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Hyperparameter("dropout", 0.0, 0.5)]
    ).recommended_kernel(),
    "problem_default_recommended": lambda: _DefaultKernelProblem(
        torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64), num_users=1
    ).recommended_kernel(),
    "normal_location_recommended": lambda: NormalLocation(dim=2).recommended_kernel(),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_the_library_builds_resumes_exactly_without_config(tmp_path, name):
    kernel = KERNELS[name]()
    opt, cfg, objective = _run(tmp_path, kernel=kernel)
    opt.close()
    resumed = DPGIBO.resume(tmp_path)  # no config: rebuilt from the allow-list
    assert type(resumed.config.kernel) is type(kernel) and resumed.config.kernel.dtype == torch.float64
    for (k, a), (_, b) in zip(opt.kernel.named_parameters(), resumed.kernel.named_parameters(), strict=True):
        assert a.dtype == b.dtype == torch.float64 and torch.equal(a, b), k
    assert resumed.state_dict()["meta"] == opt.state_dict()["meta"]
    full = DPGIBO(cfg).run(objective, progress=False).release
    done = resumed.run(objective, progress=False).release
    assert torch.equal(done.iterates, full.iterates) and torch.equal(done.released_gradients, full.released_gradients)


def test_a_kernel_spec_without_a_dtype_reads_as_float64(tmp_path):
    r"""``state.json`` of schema version 1 has no ``dtype`` in the kernel's spec."""
    _run(tmp_path, kernel=KERNELS["scale_matern_float64"]())[0].close()
    path = tmp_path / ckpt.STATE_FILE
    doc = json.loads(path.read_text())
    for bad in ("float16", ["float64"]):
        path.write_text(
            json.dumps({**doc, "kernel": {**doc["kernel"], "spec": {**doc["kernel"]["spec"], "dtype": bad}}})
        )
        with pytest.raises(ValueError, match=r"kernel\.spec\.dtype"):
            DPGIBO.resume(tmp_path)
    assert doc["kernel"]["spec"].pop("dtype") == "float64"
    path.write_text(json.dumps(doc))
    assert DPGIBO.resume(tmp_path).kernel.outputscale.dtype == torch.float64


def test_a_schema_1_checkpoint_from_before_these_checks_resumes(tmp_path):
    root = tmp_path / "ck"
    shutil.copytree(V1_CHECKPOINT, root)
    for folder in (root, root / "gp", root / "losses"):  # git keeps no directory modes
        os.chmod(folder, 0o700)
    before_config, config_code = _loop_setup()
    namespace: dict = {}
    exec(before_config + config_code.replace("batch_size=3,", "batch_size=3, seed=11,"), namespace)
    config, problem = namespace["config"], namespace["problem"]
    doc = json.loads((root / ckpt.STATE_FILE).read_text())
    assert doc["schema_version"] == 1 and "dtype" not in doc["kernel"]["spec"]
    assert {"privacy_budget_mu", "batch_selection"} <= set(doc["config"])  # the fields' old names (RENAMED_FIELDS)
    assert "acqf_speed" not in doc["config"] and config.acqf_speed == "fast"  # written before issue 33
    with_config = DPGIBO.resume(root, config)  # today's default speed may resume it (public search only)
    assert with_config.iteration == 2 and with_config.options.batches.speed == "fast"
    with_config.close()
    resumed = DPGIBO.resume(root)  # without config: the float64 kernel rebuilt exactly
    assert resumed.iteration == 2 and resumed.kernel.offset.dtype == torch.float64
    assert resumed.config.acqf_speed == "reference"  # it goes on searching as it was written to
    X = resumed.ask()
    resumed.tell(X, problem(X))
    resumed.close()
    again = DPGIBO.resume(root)  # what it wrote reads back too
    assert again.iteration == 3 and len(again.ledger.validation.steps()) == 3
    assert torch.equal(torch.stack(list(again.state.iterates)), torch.stack(list(resumed.state.iterates)))


@pytest.mark.timeout(300)
def test_the_getting_started_loop_resumes_in_a_fresh_process_without_config(tmp_path):
    before_config, config_code = _loop_setup()
    namespace: dict = {}
    exec(before_config + config_code, namespace)
    config, problem = namespace["config"], namespace["problem"]
    directory = tmp_path / "ckpt"
    opt = DPGIBO(config, checkpoint_dir=directory)
    for _ in range(2):
        X = opt.ask()
        opt.tell(X, problem(X))
    opt.close()  # the process "ends": the directory is free for the next one
    script = before_config + textwrap.dedent(
        """
        import json, sys
        import botorch_dp
        opt = DPGIBO.resume(sys.argv[1])       # no config
        assert opt.iteration == 2, opt.iteration
        result = opt.run(problem, progress=False)
        release = result.release
        print(json.dumps({"module": botorch_dp.__file__, "steps": len(release.batch_sizes),
                          "mu": release.guarantee.mu, "iterates": release.iterates[:3].tolist()}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(directory)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(out["module"]).resolve().is_relative_to(ROOT)  # the code under test, not an installed copy
    assert out["steps"] == 10 and out["mu"] == pytest.approx(1.0, rel=1e-9)
    assert out["iterates"] == torch.stack(list(opt.state.iterates)).tolist()
    assert DPGIBO.resume(directory).is_done


# ---------------------------------------------------------------------- 4. the config fingerprint
def test_a_consistently_edited_config_is_refused_by_its_fingerprint(tmp_path):
    _, cfg, _ = _run(tmp_path)
    path = tmp_path / ckpt.STATE_FILE
    doc = json.loads(path.read_text())
    doc["config"]["clip_bound"] = {"float": (50.0).hex()}  # valid, and consistent with everything else
    path.write_text(json.dumps(doc))
    for config in (None, cfg):
        with pytest.raises(ValueError, match="config_fingerprint"):
            DPGIBO.resume(tmp_path, config)
    # Without a key, an edit that also rewrites the fingerprint cannot be detected (documented).
    doc["config_fingerprint"] = ckpt.json_fingerprint(doc["config"])
    path.write_text(json.dumps(doc))
    assert DPGIBO.resume(tmp_path).config.clip_bound == 50.0
