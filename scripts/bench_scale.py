r"""Scale benchmark of one DP-GIBO ``tell`` and its checkpoint (issue 13, item 10).

For each number of users ``n``, runs a few iterations of DP-GIBO (fixed batches of ``d + 1``
points, a quadratic per-user loss) and reports, per iteration:

- the wall time of ``tell`` without a checkpoint (best of ``--repeat`` identical runs) and
  with one, next to the bare matmul ``A @ Y`` of the same size (``d x N`` by ``N x n``, the
  whole loss matrix stacked, best of 3) measured in the same process right after the tell;
- the checkpoint bytes written by that ``tell`` (new loss file + new gp file + ``state.json``);
- memory, from the resident set (Linux ``VmRSS``; the peak ``VmHWM`` is reset before the
  checkpointed ``tell`` through ``/proc/self/clear_refs``, and freed heap memory is handed
  back to the system with ``malloc_trim`` before each reading), over the bytes of the whole
  ``N x n`` loss matrix after the ``tell``:

  * **working memory**: the peak during the ``tell`` above the resident size after it, i.e.
    what the ``tell`` allocates and frees again (the new block it keeps is not counted);
  * **held + caller's**: the peak above the resident size before any losses existed, i.e.
    everything: the losses the run holds, the caller's new ``b x n`` batch (still alive
    during the ``tell``; ``tell`` must copy it, so at the first iteration this alone is
    2×) and the working memory.

The comparison is against the bare matmul: ``tell / matmul`` is how many times the cost of
forming ``A @ Y`` alone one tell costs, both timed in the same process under the same load.
Writes ``reports/bench_scale.json`` and ``reports/bench_scale.md`` (``--out`` elsewhere) with
the command, the machine, torch's thread count and the date (``benchmarks.provenance``).

    python scripts/bench_scale.py            # n in {1e4, 1e5, 1e6}
    python scripts/bench_scale.py --quick    # n in {1e3, 1e4}, seconds
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.optim.options import FixedClip, batch_rule

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ (the report header) is the repo's top-level package, not installed

from benchmarks.provenance import finished, header_lines, provenance, write_report  # noqa: E402

COMPARED_AGAINST = (
    "one DPGIBO.tell without a checkpoint (best of the repeated identical runs) over the bare "
    "A @ Y of the same size (d x N by the whole N x n loss matrix stacked; best of 3 per run), timed in the "
    "same process right after each tell, so both see the same load"
)


def _dir_bytes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _config(d: int, iterations: int) -> DPGIBOConfig:
    kernel = RBFKernel(ard_num_dims=d)
    kernel.lengthscale = 1.5
    return DPGIBOConfig(
        bounds=torch.tensor([[-2.0] * d, [4.0] * d], dtype=torch.float64),
        kernel=kernel,
        num_iterations=iterations,
        privacy_mu=1.0,
        clip=FixedClip(2.0),
        step_size=0.3,
        batches=batch_rule(d + 1),
        search_radius=0.5,
        seed=0,
        num_restarts=2,
        raw_samples=32,
    )


def _rss() -> tuple[int, int]:
    r"""(VmRSS, VmHWM) of this process in bytes, from ``/proc/self/status``."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def _settled_rss() -> int:
    r"""``VmRSS`` after collecting garbage and returning freed heap memory to the system
    (``malloc_trim``), so that it counts memory that is held, not memory cached by malloc."""
    gc.collect()
    if hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
    return _rss()[0]


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux)


def _objective(n: int, d: int):
    g = torch.Generator().manual_seed(0)
    centres = 1.0 + torch.randn(n, d, generator=g, dtype=torch.float64)

    def objective(X: torch.Tensor) -> torch.Tensor:  # b x n, built row by row (b x n memory only)
        return torch.stack([0.5 * (centres - x).pow(2).sum(-1) for x in X])

    return objective


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _bare_matmul(opt: DPGIBO) -> float:
    r"""Best of 3 times of ``A @ Y`` for the last step's ``A`` and the stacked ``N x n`` losses."""
    A = opt.state.gp.gradient_weights(opt.state.iterates[-2])
    Y = torch.cat(opt.state.blocks)
    return min(_timed(torch.matmul, A, Y) for _ in range(3))


def _plain_runs(cfg: DPGIBOConfig, objective, iterations: int, repeat: int):
    r"""Per iteration: the best ``tell`` time over ``repeat`` identical runs without a
    checkpoint, and the best of 3 bare ``A @ Y`` (whole matrix) right after each tell."""
    tell_s = [float("inf")] * iterations
    matmul_s = [float("inf")] * iterations
    for _ in range(repeat):
        opt = DPGIBO(cfg)
        for t in range(iterations):
            X = opt.ask()
            Y_new = objective(X)
            gc.collect()
            tell_s[t] = min(tell_s[t], _timed(opt.tell, X, Y_new))
            del Y_new
            matmul_s[t] = min(matmul_s[t], _bare_matmul(opt))
        iterates = torch.stack(opt.state.iterates)
        del opt
    return tell_s, matmul_s, iterates


def bench(n: int, d: int, iterations: int, workdir: Path, repeat: int = 1) -> list[dict[str, float]]:
    r"""Rows of measurements, one per iteration, for ``n`` users."""
    objective = _objective(n, d)
    cfg = _config(d, iterations)
    tell_s, matmul_s, plain_iterates = _plain_runs(cfg, objective, iterations, repeat)
    baseline = _settled_rss()  # the objective's data and the libraries, no losses
    checkpoint_dir = workdir / f"n{n}"
    opt = DPGIBO(cfg, checkpoint_dir=checkpoint_dir)
    rows = []
    for t in range(iterations):
        X = opt.ask()
        Y_new = objective(X)
        before = _dir_bytes(checkpoint_dir)
        _settled_rss()
        _reset_peak()
        tell_ckpt_s = _timed(opt.tell, X, Y_new)
        _, peak = _rss()
        after_rss = _settled_rss()  # the run's losses and the caller's batch, still alive
        after = _dir_bytes(checkpoint_dir)
        written = sum(size for name, size in after.items() if name not in before or name == "state.json")
        loss_bytes = sum(size for name, size in after.items() if name.startswith("losses/") and name not in before)
        del Y_new
        N = opt.state.X.shape[0]
        matrix = N * n * 8
        rows.append(
            dict(
                n=n,
                t=t + 1,
                N=N,
                tell_s=tell_s[t],
                tell_ckpt_s=tell_ckpt_s,
                matmul_s=matmul_s[t],
                written=written,
                loss_bytes=loss_bytes,
                total=sum(after.values()),
                working_ratio=max(peak - after_rss, 0) / matrix,
                peak_ratio=(peak - baseline) / matrix,
            )
        )
    assert torch.equal(torch.stack(opt.state.iterates), plain_iterates)  # same run with and without checkpoint
    return rows


def render(report: dict) -> str:
    r"""The markdown report: the provenance header, what is compared, and one row per (n, iteration)."""
    s = report["settings"]
    lines = header_lines(report, "Cost of a tell at scale (`scripts/bench_scale.py`)")
    lines += [
        f"d = {s['dim']}, batches of d + 1 points, {s['iterations']} iterations per n, a quadratic per-user loss; "
        f"tell best of {s['repeat']} run(s), A @ Y best of {3 * s['repeat']}.",
        "",
        f"Compared against (tell / matmul): {report['compared_against']}.",
        "",
        "Memory over the N·n·8 bytes of the loss matrix: *working* = the peak during the checkpointed tell above "
        "the resident size after it; *held + caller's* = the peak above the resident size before any losses "
        "existed (Linux VmHWM reset before the tell, malloc_trim before each reading).",
        "",
        "| n | iter | N | tell (no ckpt) s | tell + ckpt s | A @ Y s | tell / matmul | written MB | loss file MB | "
        "checkpoint MB | working memory / loss matrix | held + caller's / loss matrix |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['n']:.0e} | {r['t']} | {r['N']} | {r['tell_s']:.3f} | {r['tell_ckpt_s']:.3f} | "
            f"{r['matmul_s']:.3f} | "
            f"{r['tell_over_matmul']:.2f} | {r['written'] / 1e6:.2f} | {r['loss_bytes'] / 1e6:.2f} | "
            f"{r['total'] / 1e6:.2f} | {r['working_ratio']:.2f} | {r['peak_ratio']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n in {1e3, 1e4} (seconds)")
    parser.add_argument("--users", type=int, nargs="*", help="override the list of n")
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs without checkpoint whose best tell time is reported (default 3, --quick 1)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "reports", help="directory of bench_scale.json/.md")
    parser.add_argument("--note", default=None, help="a sentence for the report (why this size, say)")
    args = parser.parse_args(argv)
    users = args.users or ([10**3, 10**4] if args.quick else [10**4, 10**5, 10**6])
    repeat = args.repeat or (1 if args.quick else 3)
    stamp = provenance("scripts/bench_scale.py", argv, args.note)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixed noise seed warns: this is a benchmark
        for n in users:
            rows += bench(n, args.dim, args.iterations, Path(tmp), repeat)
    for r in rows:
        r["tell_over_matmul"] = r["tell_s"] / r["matmul_s"]
    report = {
        **finished(stamp),
        "settings": {"users": users, "dim": args.dim, "iterations": args.iterations, "repeat": repeat},
        "compared_against": COMPARED_AGAINST,
        "rows": rows,
    }
    text = render(report)
    print(text)
    write_report(args.out, "bench_scale", report, text)
    sys.stdout.flush()
    return rows


if __name__ == "__main__":
    main()
