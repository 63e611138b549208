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
from gpytorch.kernels import MaternKernel, PolynomialKernel, RBFKernel, RQKernel, ScaleKernel


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
