r"""A short checkpointed DP-GIBO run on the normal-location problem, and a checkpoint's files, for the
checkpoint tests that go through ``DPGIBO`` (tests/optim/test_checkpoint_files.py, tests/optim/checkpoint/)."""

from __future__ import annotations

from pathlib import Path

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.storage.lock import LOCK_FILE
from tests.optim.loop_helpers import nl_config, normal_location


def run_checkpointed(directory, iterations=2, **kw):
    _, objective = normal_location(n=12, d=2)
    cfg = nl_config(d=2, privacy_mu=1.0, num_iterations=6, seed=5, **kw)
    opt = DPGIBO(cfg, checkpoint_dir=directory)
    for _ in range(iterations):
        X = opt.ask()
        opt.tell(X, objective(X))
    return opt, cfg, objective


def contents(root: Path) -> dict[str, bytes]:
    r"""The checkpoint's files (the owner's lock file aside: each owner writes its name there)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }
