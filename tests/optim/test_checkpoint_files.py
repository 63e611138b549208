r"""The checkpoint directory as a file-system object (issue 28, item 5).

A new run never takes over a directory that holds a checkpoint; no write or read follows a
symbolic link; the directory must belong to the user and be closed to group and others;
every kernel the library and its examples build resumes exactly without ``config=`` (the
loop of docs/getting-started.md also in a fresh process); a checkpoint written before these checks (schema
version 1) still resumes; and the stored ``config_fingerprint`` is compared on resume.
"""

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
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options import FixedClip
from botorch_dp.optim.stored_config import encode_value
from botorch_dp.problems import NormalLocation
from tests.optim.checkpoint.checkpoint_helpers import run_checkpointed as _run

from .loop_helpers import rbf_kernel

ROOT = Path(__file__).resolve().parents[2]
#: A checkpoint written by the code of commit 1d7e655 (before this file's checks): the loop
#: example (then in the README, now in docs/getting-started.md) with ``seed=11``, stopped after
#: two iterations.
V1_CHECKPOINT = ROOT / "tests" / "data" / "checkpoints" / "v1_readme_loop"


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
    code = config_code.replace("batches=FixedBatches(3),", "batches=FixedBatches(3), seed=11,")
    assert "seed=11" in code
    exec(before_config + code, namespace)
    config, problem = namespace["config"], namespace["problem"]
    doc = json.loads((root / ckpt.STATE_FILE).read_text())
    assert doc["schema_version"] == 1 and "dtype" not in doc["kernel"]["spec"]
    assert {"privacy_budget_mu", "batch_selection"} <= set(doc["config"])  # the fields' old names (RENAMED_FIELDS)
    assert "acqf_speed" not in doc["config"] and config.batches.speed == "fast"  # written before issue 33
    with_config = DPGIBO.resume(root, config)  # today's default speed may resume it (public search only)
    assert with_config.iteration == 2 and with_config.options.batches.speed == "fast"
    with_config.close()
    resumed = DPGIBO.resume(root)  # without config: the float64 kernel rebuilt exactly
    assert resumed.iteration == 2 and resumed.kernel.offset.dtype == torch.float64
    assert resumed.config.batches.speed == "reference"  # it goes on searching as it was written to
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
    doc["config"]["clip"] = encode_value(FixedClip(50.0).spec())  # valid, and consistent with everything else
    path.write_text(json.dumps(doc))
    for config in (None, cfg):
        with pytest.raises(ValueError, match="config_fingerprint"):
            DPGIBO.resume(tmp_path, config)
    # Without a key, an edit that also rewrites the fingerprint cannot be detected (documented).
    doc["config_fingerprint"] = ckpt.json_fingerprint(doc["config"])
    path.write_text(json.dumps(doc))
    assert DPGIBO.resume(tmp_path).config.clip == FixedClip(50.0)
