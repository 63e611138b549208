r"""Shared settings of the loop tests: a normal-location objective and small configs."""

import math

import torch
from gpytorch.kernels import PolynomialKernel, RBFKernel

from botorch_dp.optim.dp_gibo import DPGIBOConfig
from botorch_dp.optim.options import FixedBatches

FAST = dict(num_restarts=2, raw_samples=32)


def normal_location(n=50, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = 1 + torch.randn(n, d, generator=g, dtype=torch.float64)

    def objective(X):
        return 0.5 * (X[:, None, :] - x[None]).pow(2).sum(-1)

    return x, objective


def poly_kernel():
    k = PolynomialKernel(power=2)
    k.offset = 1.0
    return k


def rbf_kernel(d, ls=1.0):
    k = RBFKernel(ard_num_dims=d)
    k.lengthscale = ls
    return k


def nl_config(d=5, **kw):
    r"""A small config; a test that gives a family's old flat keywords (``batch_search=...``) gets
    the base's settings of that family in the old spelling too (``batch_size=3``), so they combine."""
    from botorch_dp.optim.legacy_options import FLAT_FIELDS

    base = dict(
        bounds=torch.tensor([[-2.0] * d, [4.0] * d], dtype=torch.float64),
        kernel=poly_kernel(),
        num_iterations=20,
        privacy_mu=math.inf,
        clip=10.0,
        step_size=0.5,
        batches=FixedBatches(3),
        theta0=torch.zeros(d, dtype=torch.float64),
        search_radius=0.5,
        **FAST,
    )
    flat_families = {FLAT_FIELDS[name][0] for name in kw if name in FLAT_FIELDS}
    if "clip" in flat_families:
        base.pop("clip")
        base["clip_bound"] = 10.0
    if "batches" in flat_families or "batch_selection" in kw:
        base.pop("batches")
        base["batch_size"] = 3
    base.update(kw)
    return DPGIBOConfig(**base)


def resume_config(**kw):
    r"""A short private run (2-D normal location, ``μ = 0.6``, 4 steps of 2 points, seed 3): the run the
    resume tests (test_resume_checks.py, test_resume_ledger.py) checkpoint and resume."""
    base = dict(d=2, privacy_mu=0.6, clip_bound=2.0, num_iterations=4, batch_size=2, seed=3)
    base.update(kw)
    return nl_config(**base)


def resumed_each(directory, *configs):
    """``DPGIBO.resume(directory, config)`` for each config in turn (None: the stored one), each
    closed before the next resumes (one owner per checkpoint directory)."""
    from botorch_dp.optim.dp_gibo import DPGIBO

    for config in configs:
        with DPGIBO.resume(directory, config) as opt:
            yield opt
