"""Shared builders for the tests."""

import contextlib
import importlib.util
import sys
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
