r"""Benchmark of partitioned users (issue 17, item 4): in-process vs a Dask LocalCluster.

For each number of users ``n``, synthetic users (``distributed.synthetic.SyntheticUsers``:
two numbers per user, generated where they are evaluated) are held

- **in-process**: one process (spawned, one torch thread) holds all users' loss rows
  (``InProcessPartitions`` with one partition: the arithmetic of an in-process DP-GIBO tell);
- **dask, W workers**: a ``LocalCluster(n_workers=W, threads_per_worker=1, processes=True)``
  with one partition of ``n/W`` users per worker (``DaskPartitions``); the driver (this
  process) never holds a loss.

Each run first evaluates ``|D| − iterations·b`` points in batches of ``b = d + 1`` (the
"fill", reported separately), then times ``iterations`` steps. A step is what a
partitioned DP-GIBO iteration does with the users: evaluate ``b`` new points on every
user, send ``A`` (``d x |D|``, public, random here), form the partitions' clipped sums and
release them with noise (``release_partial_sums``). Batch selection (public, the same in
every setup) is not timed. Reported per setup: the median time per step, the speed-up of
each Dask setup over two baselines (Dask with one worker: what adding workers buys; the
in-process run: what a cluster buys over not using one, its scheduling and transfer costs
included), the peak resident memory of each process holding users (``ru_maxrss``,
including the ~0.3 GiB of Python and torch) next to the bytes of its partition's
``|D| x n_P`` losses, and the growth of the driver's resident memory.

    python scripts/bench_distributed.py            # n in {1e6, 1e7}, |D| = 200, d = 15
    python scripts/bench_distributed.py --quick    # n = 2e4, |D| = 24, d = 3 (seconds)
    python scripts/bench_distributed.py --users 1e7 --no-in-process   # Dask only: 7.5 GiB per worker

Run it on an otherwise idle machine; pin it to two cores with ``taskset -c 0,1`` to
compare with the "2 cores" goal. Writes ``reports/bench_distributed.json`` and
``reports/bench_distributed.md`` (``--out`` elsewhere) with the command, the machine, torch's
thread count and the date (``benchmarks.provenance``).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

from botorch_dp.distributed import InProcessPartitions
from botorch_dp.distributed.synthetic import SyntheticUsers
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, default_chunk_size, release_partial_sums

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ (the report header) is the repo's top-level package, not installed

from benchmarks.provenance import finished, header_lines, provenance, write_report  # noqa: E402

GIB = 2.0**30
COMPARED_AGAINST = (
    "each Dask setup's median time per step against two baselines measured in the same run: Dask with one "
    "worker (speed-up vs 1 worker: what more workers buy) and the in-process run, one spawned process with one "
    "torch thread holding every user (speed-up vs in-process: what the cluster buys over no cluster, its "
    "scheduling and transfers included)"
)


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _batches(points: int, dim: int, batch: int, seed: int) -> list[torch.Tensor]:
    r"""The public evaluation points, in batches of ``batch`` (the last may be smaller)."""
    X = 2.0 * torch.rand(points, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 1.0
    return list(X.split(batch))


def run_steps(partitions, num_users: int, dim: int, points: int, iterations: int, seed: int) -> dict:
    r"""Fill, then time ``iterations`` partitioned steps on ``partitions``; returns the timings."""
    batch = dim + 1
    batches = _batches(points, dim, batch, seed)
    first = max(1, len(batches) - iterations)
    t0 = time.perf_counter()
    partitions.evaluate(batches[:first])
    fill = time.perf_counter() - t0
    mechanism = GaussianGradientMechanism(clip_bound=1.0, num_users=num_users, privacy_mu=1.0, num_steps=iterations)
    gen = torch.Generator().manual_seed(seed + 1)
    times = []
    for t in range(first, len(batches)):
        start = time.perf_counter()
        partitions.evaluate(batches[: t + 1])
        N = sum(b.shape[0] for b in batches[: t + 1])
        A = (torch.rand(dim, N, generator=gen, dtype=torch.float64) - 0.5) * (4.0 / N)  # public weights
        partials = partitions.partial_sums(A, clip_bound=1.0, chunk_size=default_chunk_size(num_users, dim))
        release_partial_sums(mechanism, partials)
        times.append(time.perf_counter() - start)
    return {"fill_s": fill, "step_s": times, "points": sum(b.shape[0] for b in batches)}


def _in_process(num_users: int, dim: int, points: int, iterations: int, seed: int) -> dict:
    r"""The in-process setup, run in a fresh process with one torch thread."""
    torch.set_num_threads(1)
    out = run_steps(
        InProcessPartitions([SyntheticUsers(num_users, dim, seed)]), num_users, dim, points, iterations, seed
    )
    out["peak_rss"] = [_peak_rss_bytes()]
    return out


def _dask(num_users: int, workers: int, dim: int, points: int, iterations: int, seed: int) -> dict:
    from distributed import Client, LocalCluster

    from botorch_dp.distributed.dask import DaskPartitions

    sizes = [num_users // workers + (k < num_users % workers) for k in range(workers)]
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, memory_limit=0, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(torch.set_num_threads, 1)
        rss0 = _rss_bytes()
        partitions = DaskPartitions(client, [SyntheticUsers(n, dim, seed + k) for k, n in enumerate(sizes)])
        out = run_steps(partitions, num_users, dim, points, iterations, seed)
        out["driver_growth"] = max(0, _rss_bytes() - rss0)
        peaks = client.run(_peak_rss_bytes)
        out["peak_rss"] = [peaks[w] for w in partitions.workers]
        partitions.close()
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=float, nargs="+", default=[1e6, 1e7], help="numbers of users n")
    parser.add_argument("--points", type=int, default=200, help="|D| at the last timed step")
    parser.add_argument("--dim", type=int, default=15, help="d")
    parser.add_argument("--iterations", type=int, default=3, help="timed steps per setup")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Dask worker counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="n = 2e4, |D| = 24, d = 3, 2 steps")
    parser.add_argument(
        "--no-in-process",
        action="store_true",
        help="skip the in-process setup (it holds all n·|D| losses in one process)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "reports", help="directory of bench_distributed.json/.md")
    parser.add_argument("--note", default=None, help="a sentence for the report (why this size, say)")
    args = parser.parse_args(argv)
    stamp = provenance("scripts/bench_distributed.py", argv, args.note)
    if args.quick:
        args.users, args.points, args.dim, args.iterations = [2e4], 24, 3, 2
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # the spawned in-process run imports this module by name
        sys.path.insert(0, here)
    rows = []
    for n in (int(u) for u in args.users):
        if not args.no_in_process:
            with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                res = pool.submit(_in_process, n, args.dim, args.points, args.iterations, args.seed).result()
            rows.append({"n": n, "setup": "in-process", "workers": 1, **res, "driver_growth": None})
        for w in args.workers:
            rows.append(
                {
                    "n": n,
                    "setup": "dask",
                    "workers": w,
                    **_dask(n, w, args.dim, args.points, args.iterations, args.seed),
                }
            )
    for row in rows:
        row["median_step_s"] = statistics.median(row["step_s"])
    for row in rows:
        base = {
            setup: next(
                (r["median_step_s"] for r in rows if r["n"] == row["n"] and r["setup"] == setup and r["workers"] == 1),
                None,
            )
            for setup in ("dask", "in-process")
        }
        dask = row["setup"] == "dask"
        row["speedup"] = base["dask"] / row["median_step_s"] if dask and base["dask"] else None  # vs 1 worker
        row["speedup_vs_in_process"] = (
            base["in-process"] / row["median_step_s"] if dask and base["in-process"] else None
        )
    report = {
        **finished(stamp),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "note")},
        "compared_against": COMPARED_AGAINST,
        "rows": rows,
    }
    text = render(report)
    print(text)
    write_report(args.out, "bench_distributed", report, text)
    return rows


def render(report: dict) -> str:
    r"""The markdown report: the provenance header, what is compared, one row per (n, setup)."""
    s, rows = report["settings"], report["rows"]

    def times(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}×"

    lines = header_lines(report, "Partitioned users: in-process vs Dask (`scripts/bench_distributed.py`)")
    lines += [
        f"Setting: |D| = {rows[0]['points']} at the last timed step, d = {s['dim']}, b = d + 1, "
        f"{s['iterations']} timed steps "
        "(evaluate a batch on every user, send A, clipped partial sums, release); synthetic users generated where "
        "they are evaluated; one torch thread per process holding users.",
        "",
        f"Compared against: {report['compared_against']}.",
        "",
        "| n | setup | workers | s / step (median) | speed-up vs 1 worker | speed-up vs in-process | fill s "
        "| peak RSS per worker (GiB) | its losses (GiB) | driver growth (GiB) |",
        "|---:|---|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for row in rows:
        share = [row["n"] // row["workers"] + (k < row["n"] % row["workers"]) for k in range(row["workers"])]
        losses = " / ".join(f"{row['points'] * n * 8 / GIB:.2f}" for n in share)
        peaks = " / ".join(f"{p / GIB:.2f}" for p in row["peak_rss"])
        growth = "–" if row["driver_growth"] is None else f"{row['driver_growth'] / GIB:.3f}"
        lines.append(
            f"| {row['n']:.0e} | {row['setup']} | {row['workers']} | {row['median_step_s']:.3f} | "
            f"{times(row['speedup'])} | {times(row['speedup_vs_in_process'])} | {row['fill_s']:.2f} | "
            f"{peaks} | {losses} | {growth} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
