r"""The runs of the checkpoints in ``tests/data/checkpoints/v3_*`` (written by the code of commit
64cb0e9, state version 3, with the per-family keys ``adaptive_clip``, ``noise_and_selection`` and
``subspace``). ``test_run_state.py`` resumes each stored checkpoint and compares it with an
uninterrupted run of the same config today.

Written with ``python -m tests.optim.version3_runs DIR`` on that commit's code: each run is
stopped after ``STOPPED_AT[name]`` steps (``None``: run to the end, its selection made) and its
checkpoint directory is copied to ``DIR/v3_<name>``."""

from __future__ import annotations

import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.optim.options import (
    AdaptiveNorm,
    FixedBatches,
    FullMatrixAdaGrad,
    NoisyLoss,
    Projected,
    QuantileClip,
)
from botorch_dp.optim.subspace import FixedSubspace

D, N = 3, 16
#: The steps each run had taken when its checkpoint was written (``None``: finished).
STOPPED_AT = {"quantile_clip_subspace": 2, "private_preconditioner": 2, "adaptive_noisy_loss": None}


def objective(X: torch.Tensor) -> torch.Tensor:
    r"""Per-user losses ``½‖x − x_i‖²`` of ``N`` users in ``D`` dimensions (``b x N``)."""
    x = 1 + torch.randn(N, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return 0.5 * (X[:, None, :] - x[None]).pow(2).sum(-1)


def config(name: str) -> DPGIBOConfig:
    r"""The config of the run ``name``."""
    from gpytorch.kernels import PolynomialKernel

    kernel = PolynomialKernel(power=2)
    kernel.offset = 1.0
    basis = torch.eye(D, dtype=torch.float64)[:, :2]
    options: dict[str, dict[str, Any]] = {
        "quantile_clip_subspace": dict(
            clip=QuantileClip(2.0), projection=Projected(FixedSubspace(basis)), step_rule=FullMatrixAdaGrad("noisy")
        ),
        "private_preconditioner": dict(
            clip=3.0, projection=Projected(FixedSubspace(basis)), step_rule=FullMatrixAdaGrad("private")
        ),
        "adaptive_noisy_loss": dict(clip=3.0, noise=AdaptiveNorm(), selection=NoisyLoss(mu=0.3, loss_clip=20.0)),
    }
    return DPGIBOConfig(
        bounds=torch.tensor([[-2.0] * D, [4.0] * D], dtype=torch.float64),
        kernel=kernel,
        num_iterations=4,
        privacy_mu=2.0,
        step_size=0.5,
        batches=FixedBatches(2),
        theta0=torch.zeros(D, dtype=torch.float64),
        search_radius=0.5,
        seed=5,
        num_restarts=2,
        raw_samples=32,
        **options[name],
    )


def _stop_after(steps: int | None) -> Any:
    r"""The ``run`` callback that stops after ``steps`` steps (``None``: none, the run goes to its end)."""
    return None if steps is None else lambda info: info.iteration == steps


def write(root: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, steps in STOPPED_AT.items():
            with tempfile.TemporaryDirectory() as tmp:
                directory = Path(tmp) / "ckpt"
                opt = DPGIBO(config(name), checkpoint_dir=directory)
                opt.run(objective, progress=False, callback=_stop_after(steps))
                opt.close()
                shutil.rmtree(root / f"v3_{name}", ignore_errors=True)
                shutil.copytree(directory, root / f"v3_{name}")


if __name__ == "__main__":
    write(Path(sys.argv[1]))
