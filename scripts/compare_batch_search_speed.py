#!/usr/bin/env python
r"""The batch search's two speeds side by side (issue 33): DP-GIBO's own time and final loss.

Runs the loss-against-dimension task's DP-GIBO job (``profile_dp_gibo.py --task dimension``)
with ``acqf_speed="reference"`` (autograd, random initial batches, the search before issue 33)
and ``acqf_speed="fast"`` (closed-form gradients, warm starts from the previous batch moved by
the step, one torch thread) on the same seeds, in one process, the two arms of a seed one
right after the other (their order alternating from seed to seed), so the load of a shared
machine hits both. Each pair shares the data, θ₀, the clip bound and the seeded privacy noise:
the final-loss difference is the search's alone. Per run: DP-GIBO's own time (the run's wall
time less the objective's), the objective's time, their ratio, the CPU time, the acquisition
evaluations and the final loss (a NON-PRIVATE diagnostic).

Writes ``OUT.json`` (every run, after each one, so a stopped comparison keeps what finished)
and ``OUT.md`` (the command, machine, threads, date, and per d: median times and ratios,
paired own-time speed-up, paired final-loss difference against the seed-to-seed spread).

Usage::

    python scripts/compare_batch_search_speed.py --dims 5 30 100 --seeds 0 1 2 3 4 --threads 2
    python scripts/compare_batch_search_speed.py --summarize a.json b.json --out reports/batch_search_speed
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

ARMS = ("reference", "fast")
HERE = Path(__file__).resolve().parent


def _profiler() -> ModuleType:
    path = HERE / "profile_dp_gibo.py"
    spec = importlib.util.spec_from_file_location("profile_dp_gibo", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the profiler from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, torch {torch.__version__}"


def one_run(profiler, dim: int, seed: int, arm: str, args: argparse.Namespace) -> dict:
    run = profiler.profile_run(dim, seed, iterations=args.iterations, clip=args.clip, n_total=2000, cprofile=False,
                               task="dimension", acqf_speed=arm)
    objective = run["parts"].get("objective", 0.0)
    own = run["total"] - objective
    return {
        "dim": dim, "seed": seed, "arm": arm, "total": run["total"], "cpu": run["cpu"], "objective": objective,
        "own": own, "ratio": own / objective, "batch_search": run["parts"].get("batch search", 0.0),
        "acquisition_evaluations": run["calls"].get("acquisition", 0), "final_loss": run["final_loss"],
        "load": os.getloadavg()[0],
    }


def mean_se(values: list[float]) -> tuple[float, float]:
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan"))


def summarize(data: dict) -> str:
    runs = data["runs"]
    lines = [
        "# Batch search speed: DP-GIBO's own time against the objective's (issue 33)",
        "",
        ("The loss-against-dimension task's DP-GIBO job (`scripts/profile_dp_gibo.py --task dimension`: 400 training "
        "points, 1000 users, μ = 1, AdaGrad η = 0.3, batches of d + 1, raw_samples 32, one restart, "
        f"acqf_maxiter 100, clip B = {data['clip']}, T = {data['iterations']}) with `acqf_speed=\"reference\"` (the "
        "search before issue 33: autograd, a random initial batch) and `acqf_speed=\"fast\"` (closed-form "
        "gradients, the previous batch moved by the step as the start, one torch thread), paired by seed "
        "(same data, θ₀ and privacy noise), the two arms of a seed run one after the other in one process."),
        "",
        "Commands (each a process of its own; `--summarize` merged their JSON files into this report):",
        "",
        *[f"- `{part['command']}`: {part['machine']}; torch threads {part['threads']}; started {part['date']}; "
          f"load average {part['load_start']:.1f} at the start" for part in data.get("parts", [data])],
        "",
        "A shared machine: wall times stretch with the load, the same for both arms of a pair.",
        "",
        ("Own time = the run's wall time less the objective's; ratio = own / objective (goal: ≤ 1.5 at "
        "d = 5 and 30, ≤ 1 at d = 100). Final losses are NON-PRIVATE diagnostics."),
        "",
        ("| d | seeds | own (s) ref / fast | objective (s) ref / fast | ratio ref / fast | own-time speed-up "
        "(paired median) | acqf evaluations ref / fast | final loss ref / fast (mean ± s.e.) | fast − ref: mean ± "
        "s.e. | seed spread (s.d. of ref) | fast no worse |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    per_seed = []
    for dim in sorted({r["dim"] for r in runs}):
        pairs: dict[int, dict[str, dict]] = {}
        for r in runs:
            if r["dim"] == dim:
                pairs.setdefault(r["seed"], {})[r["arm"]] = r
        pairs = {s: p for s, p in sorted(pairs.items()) if all(a in p for a in ARMS)}
        if not pairs:
            continue
        ref, fast = [[p[a] for p in pairs.values()] for a in ARMS]

        def med(rows: list[dict], key: str) -> float:
            return statistics.median(r[key] for r in rows)

        speedup = statistics.median(p["reference"]["own"] / p["fast"]["own"] for p in pairs.values())
        diff = [p["fast"]["final_loss"] - p["reference"]["final_loss"] for p in pairs.values()]
        d_mean, d_se = mean_se(diff)
        lr, lr_se = mean_se([r["final_loss"] for r in ref])
        lf, lf_se = mean_se([r["final_loss"] for r in fast])
        spread = statistics.stdev(r["final_loss"] for r in ref) if len(ref) > 1 else float("nan")
        no_worse = sum(x <= 0 for x in diff)
        lines.append(
            f"| {dim} | {len(pairs)} | {med(ref, 'own'):.2f} / {med(fast, 'own'):.2f} | "
            f"{med(ref, 'objective'):.2f} / {med(fast, 'objective'):.2f} | {med(ref, 'ratio'):.2f} / "
            f"{med(fast, 'ratio'):.2f} | {speedup:.1f}× | {med(ref, 'acquisition_evaluations'):.0f} / "
            f"{med(fast, 'acquisition_evaluations'):.0f} | {lr:.4f} ± {lr_se:.4f} / {lf:.4f} ± {lf_se:.4f} | "
            f"{d_mean:+.5f} ± {d_se:.5f} | {spread:.4f} | {no_worse}/{len(pairs)} |"
        )
        per_seed.append(f"- d = {dim}: " + "; ".join(
            f"{s}: {p['reference']['final_loss']:.5f} / {p['fast']['final_loss']:.5f} "
            f"(ratio {p['reference']['ratio']:.2f} / {p['fast']['ratio']:.2f})" for s, p in pairs.items()))
    lines += ["", "Medians over seeds. Per seed, final loss reference / fast (own/objective ratio):", "", *per_seed, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[5, 30, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--iterations", type=int, default=25)
    parser.add_argument("--clip", type=float, default=0.23)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="reports/batch_search_speed", help="OUT.json and OUT.md")
    parser.add_argument("--summarize", nargs="+", default=None,
                        help="only merge these JSON files into OUT.json and write OUT.md")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.summarize:
        loaded = [json.loads(Path(name).read_text()) for name in args.summarize]
        parts = [part for d in loaded for part in d.get("parts", [d])]
        data = {**loaded[0], "parts": [{k: v for k, v in part.items() if k != "runs"} for part in parts],
                "runs": [run for part in parts for run in part["runs"]]}
        out.with_suffix(".json").write_text(json.dumps({**data, "parts": parts, "runs": []}, indent=1))
        out.with_suffix(".md").write_text(summarize(data))
        return
    torch.set_num_threads(args.threads)
    profiler = _profiler()
    data = {
        "command": "python "
        + " ".join([f"scripts/{Path(sys.argv[0]).name}", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(),
        "threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": os.getloadavg()[0],
        "clip": args.clip,
        "iterations": args.iterations,
        "runs": [],
    }
    for dim in args.dims:
        for i, seed in enumerate(args.seeds):
            for arm in (ARMS if i % 2 == 0 else ARMS[::-1]):
                start = time.perf_counter()
                data["runs"].append(one_run(profiler, dim, seed, arm, args))
                r = data["runs"][-1]
                print(f"d = {dim}, seed {seed}, {arm}: own {r['own']:.2f} s, objective {r['objective']:.2f} s, "
                      f"ratio {r['ratio']:.2f}, final loss {r['final_loss']:.5f} ({time.perf_counter() - start:.0f} s, "
                      f"load {r['load']:.1f})", flush=True)
                out.with_suffix(".json").write_text(json.dumps(data, indent=1))
                out.with_suffix(".md").write_text(summarize(data))


if __name__ == "__main__":
    main()
