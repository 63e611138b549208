#!/usr/bin/env python
r"""Does capping the batch search's L-BFGS-B (``acqf_maxiter``) cost DP-GIBO loss?

The loss-against-dimension experiment runs DP-GIBO with ``acqf_maxiter=100`` (each restart of
the GIBO batch search stops after 100 L-BFGS-B iterations; BoTorch's default is 2000) because
the uncapped search is most of a d = 100 run's time (``scripts/profile_dp_gibo.py``). This
script runs that experiment's DP-GIBO job (θ₀ pilot's clip bound, μ = 1, AdaGrad η = 0.3,
T = 25 batches of d + 1) with each cap in ``--caps`` on the same seeds, so each pair shares
the data, θ₀, the pilot and the noise seed, and prints per d the final losses, the paired
differences, how often the cap is no worse, and the wall time per run. Losses are
NON-PRIVATE diagnostics; the noise is seeded (a paired comparison, not a release).

Usage::

    OMP_NUM_THREADS=1 python scripts/acqf_maxiter_check.py --dims 30 60 --seeds 0 1 2 3 4 --workers 2
    python scripts/acqf_maxiter_check.py --dims 3 --seeds 0 1 --quick      # smoke test
    python scripts/acqf_maxiter_check.py ... --json out.json  # every finished run, written as it ends
    python scripts/acqf_maxiter_check.py --summarize out.json  # the table of the runs that finished

With ``--workers N`` the runs go to N spawned processes with one torch thread each (the
longest first); wall times are then per run on one thread.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

from botorch_dp.evaluation import init_one_thread_worker, process_pool
from botorch_dp.privacy.seeding import PrivacyWarning

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is the repo's top-level benchmarks/, not installed

from benchmarks import dimension  # noqa: E402
from benchmarks.runs import format_mean_se, mean_se  # noqa: E402


def parse_cap(text: str) -> int | None:
    r"""``"none"`` (BoTorch's default search) or a positive iteration cap."""
    if text.lower() == "none":
        return None
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a cap must be 'none' or >= 1, got {text!r}")
    return value


def cap_name(cap: int | None) -> str:
    return "none" if cap is None else str(cap)


def one_run(settings: dimension.Settings, context: dict, dim: int, seed: int, cap: int | None, method: str) -> dict:
    r"""The experiment's ``method`` job at (``dim``, ``seed``) with ``acqf_maxiter=cap``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # seeded noise: a paired comparison
        runner = dimension.Runner(dataclasses.replace(settings, acqf_maxiter=cap), context)
        start = time.perf_counter()
        run = runner.gibo(dim, seed, method)
        wall = time.perf_counter() - start
    return {
        "dim": dim,
        "seed": seed,
        "cap": cap_name(cap),
        "method": method,
        "final_loss": run.final_loss,
        "num_evaluations": run.num_evaluations,
        "wall_s": wall,
        "threads": torch.get_num_threads(),
    }


def warm_up() -> None:
    r"""One smoke-sized run, so the first timed run of a process does not pay its one-off set-up
    (imports done on first use, first calls into scipy and torch's kernels: seconds)."""
    quick = dimension.quick_settings()
    one_run(quick, dimension.prepare(dataclasses.replace(quick, dims=(2,))), 2, 0, 5, "dp_gibo")


def _init_worker() -> None:
    init_one_thread_worker()
    warm_up()


def check(
    settings: dimension.Settings,
    dims: list[int],
    seeds: list[int],
    caps: list[int | None],
    *,
    method: str = "dp_gibo",
    workers: int = 1,
    json_path: Path | None = None,
) -> list[dict]:
    r"""Every (d, seed, cap) run; printed and (with ``json_path``) saved as each one ends."""
    context = dimension.prepare(dataclasses.replace(settings, dims=tuple(dims)))
    for dim in dims:
        print(f"d = {dim}: clip bound B = {dimension.clip_bound(context, dim):g}", flush=True)
    # the costly runs first (high d, uncapped), so a pool is not left waiting on one long run
    jobs = sorted(
        ((d, s, c) for d in dims for s in seeds for c in caps), key=lambda j: (-j[0], j[2] is not None, j[2] or 0, j[1])
    )
    rows: list[dict] = []

    def done(row: dict) -> None:
        rows.append(row)
        print(
            f"  d = {row['dim']} seed {row['seed']} cap {row['cap']}: loss {row['final_loss']:.4g}, "
            f"{row['wall_s']:.1f} s",
            flush=True,
        )
        if json_path is not None:
            json_path.write_text(json.dumps(rows, indent=1))

    if workers <= 1:
        warm_up()
        for d, s, c in jobs:
            done(one_run(settings, context, d, s, c, method))
    else:
        with process_pool(workers, initializer=_init_worker) as pool:
            futures = [pool.submit(one_run, settings, context, d, s, c, method) for d, s, c in jobs]
            for future in cf.as_completed(futures):
                done(future.result())
    rows.sort(key=lambda r: (r["dim"], r["seed"], r["cap"]))
    return rows


def summary(rows: list[dict], caps: list[int | None]) -> str:
    r"""A Markdown table per d: each cap's loss and wall time, and the capped-minus-reference differences.

    The reference is the first cap in ``caps`` (by default ``none``, BoTorch's search); a seed
    counts for a d only when every cap finished on it.
    """
    names = [cap_name(c) for c in caps]
    ref = names[0]
    header = ["d", "seeds"] + [f"loss, cap {n}" for n in names] + [f"wall (s), cap {n}" for n in names]
    header += [f"cap {n} − cap {ref}: mean ± s.e. (median)" for n in names[1:]]
    header += [f"cap {n} no worse" for n in names[1:]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    by = {(r["dim"], r["seed"], r["cap"]): r for r in rows}
    for dim in sorted({r["dim"] for r in rows}):
        seeds = sorted(s for s in {r["seed"] for r in rows if r["dim"] == dim} if all((dim, s, n) in by for n in names))
        if not seeds:
            continue
        loss = {n: [by[dim, s, n]["final_loss"] for s in seeds] for n in names}
        wall = {n: [by[dim, s, n]["wall_s"] for s in seeds] for n in names}
        cells = [str(dim), str(len(seeds))] + [format_mean_se(loss[n], 3) for n in names]
        cells += [f"{statistics.median(wall[n]):.3g}" for n in names]
        for n in names[1:]:
            diff = [a - b for a, b in zip(loss[n], loss[ref], strict=True)]
            mean, se = mean_se(diff)
            cells.append(f"{mean:+.3g} ± {se:.2g} ({statistics.median(diff):+.3g})")
        for n in names[1:]:
            cells.append(f"{sum(a <= b for a, b in zip(loss[n], loss[ref], strict=True))}/{len(seeds)}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("\nWall times are medians per run (one torch thread per run with --workers).")
    lines += ["", "Per seed, final loss (" + " / ".join(f"cap {n}" for n in names) + "):", ""]
    for dim in sorted({r["dim"] for r in rows}):
        cells = []
        for seed in sorted({r["seed"] for r in rows if r["dim"] == dim}):
            cells.append(
                f"{seed}: "
                + " / ".join(
                    f"{by[dim, seed, n]['final_loss']:.4g}" if (dim, seed, n) in by else "unfinished" for n in names
                )
            )
        lines.append(f"- d = {dim}: " + "; ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[30, 60])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--caps",
        type=parse_cap,
        nargs="+",
        default=[None, 100],
        help="acqf_maxiter values; the first is the reference ('none': BoTorch's default)",
    )
    parser.add_argument("--method", choices=("dp_gibo", "dp_gibo_eta1", "gibo"), default="dp_gibo")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write every finished run here as it ends")
    parser.add_argument("--quick", action="store_true", help="the experiment's smoke settings")
    parser.add_argument(
        "--summarize",
        type=Path,
        default=None,
        help="only print the table of a --json file (runs that finished before a time limit)",
    )
    args = parser.parse_args(argv)
    if len(set(args.caps)) != len(args.caps) or len(args.caps) < 2:
        parser.error("--caps needs at least two different values")
    if args.summarize is not None:
        rows = json.loads(args.summarize.read_text())
        print(summary(rows, args.caps))
        return rows
    settings = dimension.quick_settings() if args.quick else dimension.Settings()
    rows = check(
        settings, args.dims, args.seeds, args.caps, method=args.method, workers=args.workers, json_path=args.json
    )
    print(summary(rows, args.caps))
    return rows


if __name__ == "__main__":
    main()
