#!/usr/bin/env python
r"""The batch search's speeds side by side (issue 33): DP-GIBO's own time and final loss.

Runs the loss-against-dimension task's DP-GIBO job (``profile_dp_gibo.py --task dimension``)
under several search arms on the same seeds, in one process, the arms of a seed one right after
the other (their order reversed from seed to seed), so the load of a shared machine hits all:

- ``reference``: ``acqf_speed="reference"`` (autograd, random initial batches, the search before
  issue 33);
- ``fast-uncapped``: ``acqf_speed="fast"`` with ``batches.WARM_MAXITER = None`` (closed-form
  gradients and warm starts from the previous batch moved by the step, the warm L-BFGS-B run
  capped only by the task's ``acqf_maxiter``: the fast search before the warm cap);
- ``fast``: ``acqf_speed="fast"`` as it is (the warm run capped at ``WARM_MAXITER`` iterations).

The first arm of ``--arms`` is the baseline each other arm is compared with. Each pair shares the
data, θ₀, the clip bound and the seeded privacy noise: the final-loss difference is the search's
alone. Per run: DP-GIBO's own time (the run's wall time less the objective's), the objective's
time, their ratio, the CPU time, the acquisition evaluations and the final loss (a NON-PRIVATE
diagnostic).

Writes ``OUT.json`` (every run, after each one, so a stopped comparison keeps what finished)
and ``OUT.md`` (the command, machine, threads, date, and per d and arm: median times and ratios,
paired own-time speed-up, paired final-loss difference against the seed-to-seed spread).

Usage::

    python scripts/compare_batch_search_speed.py --dims 5 30 100 --seeds 0 1 2 3 4 --threads 1
    python scripts/compare_batch_search_speed.py --arms fast-uncapped fast --dims 100 --threads 1 --out a
    python scripts/compare_batch_search_speed.py --summarize a.json b.json --out reports/batch_search_speed
"""

from __future__ import annotations

import argparse
import contextlib
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

ARMS = ("reference", "fast-uncapped", "fast")
DEFAULT_ARMS = ("reference", "fast")
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


@contextlib.contextmanager
def arm_settings(arm: str):
    r"""The arm's ``acqf_speed``; ``fast-uncapped`` also lifts ``batches.WARM_MAXITER`` for the run."""
    import botorch_dp.optim.options.batches as batches

    saved = batches.WARM_MAXITER
    if arm == "fast-uncapped":
        batches.WARM_MAXITER = None
    try:
        yield "reference" if arm == "reference" else "fast"
    finally:
        batches.WARM_MAXITER = saved


def one_run(profiler, dim: int, seed: int, arm: str, args: argparse.Namespace) -> dict:
    with arm_settings(arm) as speed:
        run = profiler.profile_run(
            dim,
            seed,
            iterations=args.iterations,
            clip=args.clip,
            n_total=2000,
            cprofile=False,
            task="dimension",
            acqf_speed=speed,
        )
    objective = run["parts"].get("objective", 0.0)
    own = run["total"] - objective
    return {
        "dim": dim,
        "seed": seed,
        "arm": arm,
        "total": run["total"],
        "cpu": run["cpu"],
        "objective": objective,
        "own": own,
        "ratio": own / objective,
        "batch_search": run["parts"].get("batch search", 0.0),
        "acquisition_evaluations": run["calls"].get("acquisition", 0),
        "final_loss": run["final_loss"],
        "load": os.getloadavg()[0],
    }


def mean_se(values: list[float]) -> tuple[float, float]:
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan"))


ARM_TEXT = {
    "reference": '`acqf_speed="reference"` (the search before issue 33: autograd, a random initial batch)',
    "fast-uncapped": (
        '`acqf_speed="fast"` without the warm cap (closed-form gradients, the previous batch moved '
        "by the step as the start, one torch thread; `WARM_MAXITER = None`)"
    ),
    "fast": (
        '`acqf_speed="fast"` as it is (as `fast-uncapped`, the warm L-BFGS-B run capped at `WARM_MAXITER` iterations)'
    ),
}


def summarize(data: dict) -> str:
    runs = data["runs"]
    arms = list(data.get("arms", DEFAULT_ARMS))
    base = arms[0]
    lines = [
        "# Batch search speed: DP-GIBO's own time against the objective's (issue 33)",
        "",
        (
            "The loss-against-dimension task's DP-GIBO job (`scripts/profile_dp_gibo.py --task dimension`: "
            "400 training points, 1000 users, μ = 1, AdaGrad η = 0.3, batches of d + 1, raw_samples 32, one restart, "
            f"acqf_maxiter 100, clip B = {data['clip']}, T = {data['iterations']}) under these search arms, paired by "
            "seed (same data, θ₀ and privacy noise), the arms of a seed run one after the other in one process:"
        ),
        "",
        *[f"- `{arm}`: {ARM_TEXT[arm]}" + (" (the baseline)" if arm == base else "") for arm in arms],
        *([f"- the warm cap `WARM_MAXITER` was {data['warm_maxiter']}"] if "warm_maxiter" in data else []),
        "",
        "Commands (each a process of its own; `--summarize` merged their JSON files into this report):",
        "",
        *[
            f"- `{part['command']}`: {part['machine']}; torch threads {part['threads']}; started {part['date']}; "
            f"load average {part['load_start']:.1f} at the start"
            for part in data.get("parts", [data])
        ],
        "",
        "A shared machine: wall times stretch with the load, the same for all arms of a seed.",
        "",
        (
            "Own time = the run's wall time less the objective's; ratio = own / objective (goal: ≤ 1.5 at "
            "d = 5 and 30, ≤ 1 at d = 100). Final losses are NON-PRIVATE diagnostics."
        ),
        "",
        (
            f"| d | arm (vs `{base}`) | seeds | own (s) base / arm | objective (s) base / arm | ratio base / arm | "
            "own-time speed-up (paired median) | acqf evaluations base / arm | final loss base / arm (mean ± s.e.) | "
            "arm − base: mean ± s.e. | seed spread (s.d. of base) | arm no worse |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    per_seed = []
    for dim in sorted({r["dim"] for r in runs}):
        by_seed: dict[int, dict[str, dict]] = {}
        for r in runs:
            if r["dim"] == dim:
                by_seed.setdefault(r["seed"], {})[r["arm"]] = r
        for arm in arms[1:]:
            pairs = {s: p for s, p in sorted(by_seed.items()) if base in p and arm in p}
            if not pairs:
                continue
            ref, new = [[p[a] for p in pairs.values()] for a in (base, arm)]

            def med(rows: list[dict], key: str) -> float:
                return statistics.median(r[key] for r in rows)

            speedup = statistics.median(p[base]["own"] / p[arm]["own"] for p in pairs.values())
            diff = [p[arm]["final_loss"] - p[base]["final_loss"] for p in pairs.values()]
            d_mean, d_se = mean_se(diff)
            lr, lr_se = mean_se([r["final_loss"] for r in ref])
            lf, lf_se = mean_se([r["final_loss"] for r in new])
            spread = statistics.stdev(r["final_loss"] for r in ref) if len(ref) > 1 else float("nan")
            no_worse = sum(x <= 0 for x in diff)
            lines.append(
                f"| {dim} | {arm} | {len(pairs)} | {med(ref, 'own'):.2f} / {med(new, 'own'):.2f} | "
                f"{med(ref, 'objective'):.2f} / {med(new, 'objective'):.2f} | {med(ref, 'ratio'):.2f} / "
                f"{med(new, 'ratio'):.2f} | {speedup:.1f}× | {med(ref, 'acquisition_evaluations'):.0f} / "
                f"{med(new, 'acquisition_evaluations'):.0f} | {lr:.4f} ± {lr_se:.4f} / {lf:.4f} ± {lf_se:.4f} | "
                f"{d_mean:+.5f} ± {d_se:.5f} | {spread:.4f} | {no_worse}/{len(pairs)} |"
            )
            per_seed.append(
                f"- d = {dim}, {arm}: "
                + "; ".join(
                    f"{s}: {p[base]['final_loss']:.5f} / {p[arm]['final_loss']:.5f} "
                    f"(ratio {p[base]['ratio']:.2f} / {p[arm]['ratio']:.2f})"
                    for s, p in pairs.items()
                )
            )
    lines += ["", f"Medians over seeds. Per seed, final loss {base} / arm (own/objective ratio):", "", *per_seed, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[5, 30, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=ARMS,
        default=list(DEFAULT_ARMS),
        help="search arms, the first the baseline (default: reference fast)",
    )
    parser.add_argument("--iterations", type=int, default=25)
    parser.add_argument("--clip", type=float, default=0.23)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="reports/batch_search_speed", help="OUT.json and OUT.md")
    parser.add_argument(
        "--summarize", nargs="+", default=None, help="only merge these JSON files into OUT.json and write OUT.md"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.summarize:
        loaded = [json.loads(Path(name).read_text()) for name in args.summarize]
        parts = [part for d in loaded for part in d.get("parts", [d])]
        arms = list(dict.fromkeys(arm for part in parts for arm in part.get("arms", DEFAULT_ARMS)))
        data = {
            **loaded[0],
            "arms": arms,
            "parts": [{k: v for k, v in part.items() if k != "runs"} for part in parts],
            "runs": [run for part in parts for run in part["runs"]],
        }
        out.with_suffix(".json").write_text(json.dumps({**data, "parts": parts, "runs": []}, indent=1))
        out.with_suffix(".md").write_text(summarize(data))
        return
    if len(set(args.arms)) < 2 or len(set(args.arms)) != len(args.arms):
        parser.error(f"--arms needs at least two different arms, got {args.arms}")
    torch.set_num_threads(args.threads)
    profiler = _profiler()
    import botorch_dp.optim.options.batches as batches

    data = {
        "command": "python "
        + " ".join([f"scripts/{Path(sys.argv[0]).name}", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(),
        "threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": os.getloadavg()[0],
        "clip": args.clip,
        "iterations": args.iterations,
        "arms": list(args.arms),
        "warm_maxiter": batches.WARM_MAXITER,
        "runs": [],
    }
    for dim in args.dims:
        for i, seed in enumerate(args.seeds):
            for arm in args.arms if i % 2 == 0 else args.arms[::-1]:
                start = time.perf_counter()
                data["runs"].append(one_run(profiler, dim, seed, arm, args))
                r = data["runs"][-1]
                print(
                    f"d = {dim}, seed {seed}, {arm}: own {r['own']:.2f} s, objective {r['objective']:.2f} s, "
                    f"ratio {r['ratio']:.2f}, final loss {r['final_loss']:.5f} ({time.perf_counter() - start:.0f} s, "
                    f"load {r['load']:.1f})",
                    flush=True,
                )
                out.with_suffix(".json").write_text(json.dumps(data, indent=1))
                out.with_suffix(".md").write_text(summarize(data))


if __name__ == "__main__":
    main()
