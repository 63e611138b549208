r"""Scale benchmark of one DP-GIBO ``tell`` and its checkpoint (issue 13, item 10).

For each number of users ``n``, runs a few iterations of DP-GIBO (fixed batches of ``d + 1``
points, a quadratic per-user loss) with a checkpoint directory and reports, per iteration:
the wall time of ``tell`` without a checkpoint, with a checkpoint, the bare matmul
``A @ Y`` of the same size (``d x N`` by ``N x n``) measured in the same process, the
checkpoint bytes written by that ``tell`` (new loss file + new gp file + ``state.json``), and
the peak resident memory (Linux ``VmHWM``, reset before the ``tell`` through
``/proc/self/clear_refs``) above the process's RSS before any losses existed, over the bytes
of the whole ``N x n`` loss matrix after the ``tell``: it counts everything the run holds,
including the caller's new ``b x n`` losses (which ``tell`` keeps as the new row block).

    python scripts/bench_scale.py            # n in {1e4, 1e5, 1e6}
    python scripts/bench_scale.py --quick    # n in {1e3, 1e4}, seconds
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig


def _dir_bytes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _config(d: int, iterations: int) -> DPGIBOConfig:
    kernel = RBFKernel(ard_num_dims=d)
    kernel.lengthscale = 1.5
    return DPGIBOConfig(
        bounds=torch.tensor([[-2.0] * d, [4.0] * d], dtype=torch.float64), kernel=kernel,
        num_iterations=iterations, privacy_mu=1.0, clip_bound=2.0, step_size=0.3, batch_size=d + 1,
        search_radius=0.5, seed=0, num_restarts=2, raw_samples=32,
    )


def _rss() -> tuple[int, int]:
    r"""(VmRSS, VmHWM) of this process in bytes, from ``/proc/self/status``."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux)


def bench(n: int, d: int, iterations: int, workdir: Path) -> list[dict[str, float]]:
    r"""Rows of measurements, one per iteration, for ``n`` users."""
    g = torch.Generator().manual_seed(0)
    centres = 1.0 + torch.randn(n, d, generator=g, dtype=torch.float64)

    def objective(X: torch.Tensor) -> torch.Tensor:  # b x n, built row by row (b x n memory only)
        return torch.stack([0.5 * (centres - x).pow(2).sum(-1) for x in X])

    cfg = _config(d, iterations)
    plain = DPGIBO(cfg)
    tell_s, points = [], []
    for _ in range(iterations):
        X = plain.ask()
        Y_new = objective(X)
        start = time.perf_counter()
        plain.tell(X, Y_new)
        tell_s.append(time.perf_counter() - start)
        points.append(X)
    plain_iterates = torch.stack(plain._iterates)
    del plain, Y_new
    gc.collect()
    baseline, _ = _rss()  # the objective's data and the libraries, no losses
    opt = DPGIBO(cfg, checkpoint_dir=workdir / f"n{n}")
    rows = []
    for t in range(iterations):
        X = opt.ask()
        assert torch.equal(X, points[t])
        Y_new = objective(X)
        before = _dir_bytes(opt.checkpoint_dir)
        gc.collect()
        _reset_peak()
        start = time.perf_counter()
        opt.tell(X, Y_new)
        tell_ckpt_s = time.perf_counter() - start
        _, peak = _rss()
        after = _dir_bytes(opt.checkpoint_dir)
        written = sum(size for name, size in after.items() if name not in before or name == "state.json")
        loss_bytes = sum(size for name, size in after.items() if name.startswith("losses/") and name not in before)
        del Y_new
        N = opt._X.shape[0]
        A = opt._gp.gradient_weights(opt._iterates[-2])
        Y = torch.cat(opt._Y_blocks)
        matmul_s = min(_timed(lambda: A @ Y) for _ in range(3))
        del Y, A
        rows.append(dict(
            n=n, t=t + 1, N=N, tell_s=tell_s[t], tell_ckpt_s=tell_ckpt_s, matmul_s=matmul_s,
            written=written, loss_bytes=loss_bytes, total=sum(after.values()),
            peak_ratio=(peak - baseline) / (N * n * 8),
        ))
    assert torch.equal(torch.stack(opt._iterates), plain_iterates)  # same run with and without checkpoint
    return rows


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n in {1e3, 1e4} (seconds)")
    parser.add_argument("--users", type=int, nargs="*", help="override the list of n")
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args(argv)
    users = args.users or ([10**3, 10**4] if args.quick else [10**4, 10**5, 10**6])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in users:
            rows += bench(n, args.dim, args.iterations, Path(tmp))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, d = {args.dim}, batch d + 1, "
          f"{os.cpu_count()} CPUs; peak = (VmHWM during the checkpointed tell − RSS before any losses) / (N·n·8 bytes)")
    print("| n | iter | N | tell (no ckpt) s | tell + ckpt s | A @ Y s | tell / matmul | written MB | loss file MB | checkpoint MB | peak / loss matrix |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']:.0e} | {r['t']} | {r['N']} | {r['tell_s']:.3f} | {r['tell_ckpt_s']:.3f} | {r['matmul_s']:.3f} | "
              f"{r['tell_s'] / r['matmul_s']:.2f} | {r['written'] / 1e6:.2f} | {r['loss_bytes'] / 1e6:.2f} | "
              f"{r['total'] / 1e6:.2f} | {r['peak_ratio']:.2f} |")
    sys.stdout.flush()
    return rows


if __name__ == "__main__":
    main()
