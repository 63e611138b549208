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
from types import FrameType

import torch
from botorch.models import SingleTaskGP
from gpytorch.kernels import MaternKernel, PolynomialKernel, RBFKernel, RQKernel, ScaleKernel
from torch import Tensor


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

    model = SingleTaskGP(X, Y, covar_module=kernel, mean_module=ZeroMean(), outcome_transform=None).to(X.dtype)
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
    for needle in (
        f"Command: `{report['command']}`",
        report["date"],
        machine["cpu"],
        f"{machine['cpu_count']} logical CPUs",
        f"torch {torch.__version__} with {threads} thread",
        f"Compared against{'' if name != 'bench_scale' else ' (tell / matmul)'}: {report['compared_against']}.",
    ):
        assert needle in text, needle
    return report, text


def markdown_table(text: str) -> list[dict[str, str]]:
    """The rows of the markdown table in ``text`` (lines that start and end with ``|``), as header → cell."""
    lines = [line for line in text.splitlines() if line.startswith("|") and line.rstrip().endswith("|")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert len(cells) >= 3 and all(set(c) <= set("-:") for c in cells[1]), text
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]


class DeviceAudit(torch.overrides.TorchFunctionMode):
    r"""Catches tensors ``botorch_dp`` creates off the data's device, on a machine without a GPU.

    On a GPU the data is on ``cuda`` and torch's default device is the CPU, so a tensor the library
    creates without ``device=`` lands on the CPU. Here the data stays on the CPU and every factory
    call made directly by ``botorch_dp`` code without a ``device`` (``torch.zeros``, ``torch.eye``,
    ``torch.tensor`` of Python data, ``torch.randint`` with a generator, ...) is given the foreign
    device ``meta`` instead: a tensor that should have followed the data is then on ``meta``, and
    either the run fails where it meets the data or the audit lists it. Calls by BoTorch, GPyTorch
    or torch itself are theirs and left alone. Also listed: explicit host transfers by the library
    (``.cpu()``, ``.numpy()``, ``.to("cpu")``, ``device="cpu"``), which on a CPU are no-ops but on a
    GPU move the data, and the dtype of every ``torch.linalg`` call the library makes.

    Attributes:
        off_device: ``"file:line function"`` of each library call whose tensor result is not on
            the data's device.
        host_moves: ``"file:line function"`` of each explicit host transfer.
        linalg_dtypes: ``{"file:line function": {dtype, ...}}`` of the library's linear algebra.
        not_float64: ``"file:line function"`` of each library call with a floating result not in float64.
    """

    FACTORIES = frozenset(
        {
            torch.tensor,
            torch.as_tensor,
            torch.asarray,
            torch.zeros,
            torch.ones,
            torch.empty,
            torch.full,
            torch.eye,
            torch.arange,
            torch.linspace,
            torch.logspace,
            torch.rand,
            torch.randn,
            torch.randint,
            torch.randperm,
            torch.scalar_tensor,
        }
    )
    FROM_DATA = frozenset({torch.tensor, torch.as_tensor, torch.asarray})
    LINALG_PREFIXES = ("linalg_", "cholesky", "triangular_solve")

    def __init__(self, device: str = "cpu", foreign: str = "meta") -> None:
        super().__init__()
        import botorch_dp

        self.device, self.foreign = torch.device(device), foreign
        self._package = str(Path(botorch_dp.__file__).parent)
        torch_dir = Path(torch.__file__).parent  # torch's dispatch wrappers between a call and this mode
        self._skip = (
            __file__,
            *(
                str(torch_dir / f)
                for f in ("overrides.py", "_tensor.py", "functional.py", "_jit_internal.py", "nn/functional.py")
            ),
        )
        self.off_device: list[str] = []
        self.host_moves: list[str] = []
        self.linalg_dtypes: dict[str, set[torch.dtype]] = {}
        self.not_float64: list[str] = []

    def _library_caller(self) -> str | None:
        frame: FrameType | None = sys._getframe(2)  # the caller; a call inside torch (an optimizer, say) is torch's
        while frame is not None and frame.f_code.co_filename in self._skip:
            frame = frame.f_back
        if frame is None or not frame.f_code.co_filename.startswith(self._package):
            return None
        name = frame.f_code.co_filename[len(self._package) + 1 :]
        return f"{name}:{frame.f_lineno} {frame.f_code.co_name}"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        caller = self._library_caller()
        if caller is None:
            return func(*args, **kwargs)
        if func in self.FACTORIES and kwargs.get("device") is None:
            if not (func in self.FROM_DATA and args and isinstance(args[0], Tensor)):
                kwargs["device"] = self.foreign
        if _is_host_move(func, args, kwargs):
            self.host_moves.append(caller)
        name = getattr(func, "__name__", "")
        if name.startswith(self.LINALG_PREFIXES) or getattr(func, "__module__", "") == "torch.linalg":
            self.linalg_dtypes.setdefault(caller, set()).update(a.dtype for a in args if isinstance(a, Tensor))
        out = func(*args, **kwargs)
        results = out if isinstance(out, (tuple, list)) else (out,)
        if any(isinstance(r, Tensor) and r.device != self.device for r in results):
            self.off_device.append(caller)
        if any(isinstance(r, Tensor) and r.is_floating_point() and r.dtype != torch.float64 for r in results):
            self.not_float64.append(caller)
        return out


def _is_host_move(func, args, kwargs) -> bool:
    r"""``.cpu()``, ``.numpy()``, or a ``to``/factory call naming the CPU by name (``device=x.device`` follows
    the data, so only the string ``"cpu"`` counts)."""
    if func in (Tensor.cpu, Tensor.numpy):
        return True
    targets = [kwargs.get("device")]
    if func is Tensor.to:
        targets += list(args[1:])
    return any(isinstance(t, str) and t.split(":")[0] == "cpu" for t in targets)


def check_old_import_path(old: str, new: str) -> None:
    r"""A module kept at an old import path re-exports the new module's objects, the same objects,
    and imports without a warning (the old path stays silent).

    Args:
        old: The old module's dotted name (``botorch_dp.plan.method_choice``).
        new: The module its objects moved to (``botorch_dp.methods.choice``).
    """
    import importlib

    new_module = importlib.import_module(new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old_module = importlib.reload(importlib.import_module(old))
    assert old_module.__all__, f"{old} exports nothing"
    for name in old_module.__all__:
        assert getattr(old_module, name) is getattr(new_module, name), f"{old}.{name} is not {new}.{name}"
    public = {
        name
        for name, value in vars(old_module).items()
        if not name.startswith("_") and not isinstance(value, type(importlib))
    }
    assert public - {"annotations"} == set(old_module.__all__), sorted(public - set(old_module.__all__))
