"""Shared builders for the tests."""

import atexit
import contextlib
import functools
import importlib.util
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from botorch.models import SingleTaskGP
from gpytorch.kernels import (
    MaternKernel,
    PolynomialKernel,
    RBFKernel,
    RQKernel,
    ScaleKernel,
)


def make_kernel(name: str, d: int, dtype=torch.float64):
    """A kernel with fixed, non-trivial hyperparameters."""
    ls = torch.linspace(0.4, 1.2, d, dtype=dtype)
    if name == "rbf":
        k = ScaleKernel(RBFKernel(ard_num_dims=d)).to(dtype)
        k.base_kernel.lengthscale = ls
        k.outputscale = 1.7
    elif name == "matern52":
        k = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=d)).to(dtype)
        k.base_kernel.lengthscale = ls
        k.outputscale = 0.8
    elif name == "poly2":
        k = PolynomialKernel(power=2).to(dtype)
        k.offset = 1.0
    elif name == "rq":
        k = RQKernel(ard_num_dims=d).to(dtype)
        k.lengthscale = ls
        k.alpha = 1.3
    else:
        raise ValueError(name)
    return k


def make_model(kernel, X, Y, noise: float):
    """SingleTaskGP with fixed kernel and noise, zero mean, no transforms."""
    from gpytorch.means import ZeroMean

    model = SingleTaskGP(
        X, Y, covar_module=kernel, mean_module=ZeroMean(), outcome_transform=None
    ).to(X.dtype)
    model.likelihood.noise_covar.raw_noise_constraint.lower_bound.fill_(0.0)
    model.likelihood.noise = max(noise, 1e-12)
    model.eval()
    return model


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@contextlib.contextmanager
def loaded_script(name: str):
    """Import ``scripts/<name>.py`` as a module for the duration of the block.

    The module is registered in ``sys.modules`` under ``name`` (dataclasses look their
    module up by name) and removed afterwards.
    """
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"Cannot load {SCRIPTS / f'{name}.py'}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)


@functools.cache
def quick_reproduction() -> dict:
    """The quick-mode reproduction (serial, one torch thread), run once per test session.

    Shared by ``tests/benchmarks`` and ``tests/scripts`` (which compares ``--workers 2``
    against it), so that the quick mode runs serially only once.

    Returns:
        ``outputs.reproduce``'s dict (``results_md``, ``text``, ``runs``, ``pilot``, ...);
        the output directory is ``result["results_md"].parent``.
    """
    from benchmarks.outputs import reproduce
    from benchmarks.paper import EXPERIMENTS, Settings
    from botorch_dp.utils import torch_threads

    out = Path(tempfile.mkdtemp(prefix="quick_reproduction_"))
    atexit.register(shutil.rmtree, out, True)
    with torch_threads(1), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
        return reproduce(Settings.quick(), EXPERIMENTS, out, ["--quick", "--threads", "1"], progress=False)


def read_timing_report(out: Path, name: str, argv: list[str]) -> tuple[dict, str]:
    """``out/NAME.json`` and ``out/NAME.md`` as written by ``scripts/NAME.py ARGV``: both exist and
    carry the provenance (``benchmarks.provenance``) of this machine and this process, checked
    against independent readings (``os``, ``torch``, ``/proc/cpuinfo``, the clock). Returns both."""
    import datetime
    import json
    import os
    import re
    import shlex

    report = json.loads((out / f"{name}.json").read_text())
    text = (out / f"{name}.md").read_text()
    assert report["command"] == shlex.join(["python", f"scripts/{name}.py", *argv])
    age = datetime.datetime.now(datetime.UTC) - datetime.datetime.fromisoformat(report["date"])
    assert datetime.timedelta(0) <= age < datetime.timedelta(hours=1), report["date"]
    machine = report["machine"]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        models = re.findall(r"^model name\s*:\s*(.+?)\s*$", cpuinfo.read_text(), flags=re.M)
        assert machine["cpu"] == models[0]
    assert machine["cpu_count"] == os.cpu_count() and 1 <= machine["cpus_usable"] <= os.cpu_count()
    assert len(machine["load_average_start"]) == len(machine["load_average_end"]) == 3
    assert report["torch"] == torch.__version__ and report["torch_threads"] == torch.get_num_threads()
    assert report["wall_s"] >= 0 and report["compared_against"]
    threads = report["torch_threads"]
    for needle in (f"Command: `{report['command']}`", report["date"], machine["cpu"],
                   f"{machine['cpu_count']} logical CPUs", f"torch {torch.__version__} with {threads} thread",
                   f"Compared against{'' if name != 'bench_scale' else ' (tell / matmul)'}: "
                   f"{report['compared_against']}."):
        assert needle in text, needle
    return report, text


def markdown_table(text: str) -> list[dict[str, str]]:
    """The rows of the markdown table in ``text`` (lines that start and end with ``|``), as header → cell."""
    lines = [line for line in text.splitlines() if line.startswith("|") and line.rstrip().endswith("|")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert len(cells) >= 3 and all(set(c) <= set("-:") for c in cells[1]), text
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]
