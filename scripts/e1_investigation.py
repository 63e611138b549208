#!/usr/bin/env python
r"""Why DP-GIBO and GIBO lose on the paper's E.1 task (issue 18 item 1): one protocol change at a time.

The variants and the functions that run them are in ``benchmarks.e1`` (also the
``e1`` experiment of ``python -m benchmarks``); this script keeps the original
command line: its own resumable JSON, the import of ``reports/``'s E.1 runs, random-search
curves reused from ``reports/`` and extended by evaluating only the missing points, and the
gradient-alignment measurement (``--alignment``).

All losses are NON-PRIVATE diagnostics: the noise-free validation loss of the returned
point, in the original E.1 objective. Runs are appended to ``<out>.json`` (resumable: a
(variant, method, seed) already there is skipped), random-search curves to ``<out>_rs.json``;
``<out>.md`` is the summary table (mean ± s.e., median, wins per seed against random search).

    OMP_NUM_THREADS=1 python scripts/e1_investigation.py --variants centred eta1   # ~9 min per variant
    python scripts/e1_investigation.py --quick --out /tmp/e1                       # a few seconds
    python scripts/e1_investigation.py --render                                    # table from the JSON
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is the repo's top-level benchmarks/, not installed

from benchmarks.e1 import (  # noqa: E402, F401 - re-exported: the script's functions live there
    METHODS,
    VARIANTS,
    LogLengthscales,
    Settings,
    Variant,
    centred_gradient_weights,
    extend_rs_curve,
    gradient_alignment,
    make_problem,
    quick_settings,
    render,
    rs_key,
    run_seed,
    summarise,
)
from benchmarks.paper import pilot  # noqa: E402
from benchmarks.runs import mean_se  # noqa: E402

REPORTS = {"baseline": Path("reports/runs.json"), "theta0_centre": Path("reports/centre_theta0/runs.json")}


def stored_rs_curves() -> dict[str, list[float]]:
    r"""The random-search curves of ``reports/`` (E.1 comparison, raw box, full mode), by ``rs_key``.

    Random search does not depend on θ₀, so the two reports hold prefixes of the same curve
    per seed; the longer one is kept.
    """
    curves: dict[str, list[float]] = {}
    for path in REPORTS.values():
        if path.exists():
            for r in json.loads(path.read_text())["runs"]:
                if r["experiment"] == "comparison" and r["method"] == "random search (non-private)":
                    key = f"raw/full/{r['seed']}"
                    if len(r["losses"]) > len(curves.get(key, [])):
                        curves[key] = r["losses"]
    return curves


def imported_runs() -> list[dict]:
    r"""The E.1 GIBO and DP-GIBO (μ = 1, pilot B) runs of ``reports/`` (variant ``baseline``) and
    ``reports/centre_theta0/`` (variant ``theta0_centre``), as records of this script."""
    out = []
    for name, path in REPORTS.items():
        if not path.exists():
            continue
        for r in json.loads(path.read_text())["runs"]:
            if r["experiment"] != "comparison":
                continue
            if r["method"] == "GIBO (non-private)":
                method = "GIBO (non-private)"
            elif r["method"].startswith("DP-GIBO") and r["setting"] == "pilot B":
                method = "DP-GIBO (μ=1)"
            else:
                continue
            out.append(
                dict(
                    variant=name,
                    method=method,
                    seed=r["seed"],
                    final_loss=r["final_loss"],
                    initial_loss=r["losses"][0],
                    num_evaluations=int(r["num_evaluations"]),
                    wall_s=r["wall_s"],
                    source=str(path),
                )
            )
    return out


def variant_clip(store: dict, settings: Settings, name: str, quick: bool, needed: bool) -> float | None:
    r"""DP-GIBO's clip bound B for the variant: the pilot of ``benchmarks.paper`` on the variant's
    problem (with its centring), stored under ``store["pilots"]``; ``None`` when not ``needed``."""
    key = f"{name}/{'quick' if quick else 'full'}"
    if key not in store["pilots"]:
        if not needed:
            return None
        v = VARIANTS[name]
        pilot_problem, _ = make_problem(settings, v, settings.pilot_seed)
        with centred_gradient_weights(v.centre_losses):
            store["pilots"][key] = pilot(settings, pilot_problem)
    return store["pilots"][key]["clip_bound"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="*", default=[], choices=sorted(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0..9 (0 1 with --quick)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--quick", action="store_true", help="d = 3, n = 100, T = 2: a smoke run")
    parser.add_argument(
        "--out",
        default="reports/e1_investigation_runs",
        help="stem of the outputs: <out>.json (runs, resumable) and <out>.md (table)",
    )
    parser.add_argument("--render", action="store_true", help="only rewrite <out>.md from <out>.json")
    parser.add_argument(
        "--import-reports",
        action="store_true",
        help="add reports/'s E.1 GIBO and DP-GIBO runs as variants baseline and theta0_centre "
        "(those not already in <out>.json)",
    )
    parser.add_argument(
        "--alignment",
        action="store_true",
        help="only print the cosine of one batch's gradient estimate with the true gradient at θ₀, "
        "zero prior mean vs centred, raw and log length-scales (JSON: <out>_alignment.json)",
    )
    args = parser.parse_args(argv)
    settings = quick_settings() if args.quick else Settings()
    seeds = tuple(args.seeds) if args.seeds is not None else settings.seeds
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.with_suffix(".json"), out.with_suffix(".md")
    store = json.loads(json_path.read_text()) if json_path.exists() else {"runs": [], "pilots": {}}
    command = "python scripts/e1_investigation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.alignment:
        rows = [gradient_alignment(settings, seed, log) for log in (False, True) for seed in seeds]
        for r in rows:
            print(
                f"{'log' if r['log'] else 'raw'} seed {r['seed']:2d}  cos(zero mean) {r['cos_zero_mean']:+.3f}  "
                f"cos(centred) {r['cos_centred']:+.3f}  |∇f| {r['norm_true']:.3f}  mean loss {r['mean_loss']:.3f}"
            )
        for log in (False, True):
            sel = [r for r in rows if r["log"] == log]
            for key in ("cos_zero_mean", "cos_centred"):
                m, se = mean_se([r[key] for r in sel])
                print(f"{'log' if log else 'raw'} {key}: {m:.3f} ± {se:.3f}")
        Path(f"{out}_alignment.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
        return 0
    if args.import_reports and not args.quick:
        have = {(r["variant"], r["method"], r["seed"]) for r in store["runs"]}
        store["runs"].extend(r for r in imported_runs() if (r["variant"], r["method"], r["seed"]) not in have)
        json_path.write_text(json.dumps(store, indent=1))
    if not args.render:
        clips: dict[str, float | None] = {}
        for seed in seeds:  # seeds outer: whatever finishes is paired across the variants
            for name in args.variants:
                done = {r["method"] for r in store["runs"] if r["variant"] == name and r["seed"] == seed}
                if set(args.methods) <= done:
                    continue
                if name not in clips:
                    clips[name] = variant_clip(store, settings, name, args.quick, "DP-GIBO (μ=1)" in args.methods)
                    json_path.write_text(json.dumps(store, indent=1))
                new = run_seed(settings, name, seed, clips[name], tuple(args.methods), done)
                store["runs"].extend(new)
                json_path.write_text(json.dumps(store, indent=1))
                for r in new:
                    print(
                        f"{name:18s} seed {seed:2d} {r['method']:20s} loss {r['final_loss']:.4f} "
                        f"evals {r['num_evaluations']} ({r['wall_s']:.1f} s)",
                        flush=True,
                    )
    rs_path = Path(f"{out}_rs.json")
    rs_curves = stored_rs_curves() if not args.quick else {}
    for key, curve in (json.loads(rs_path.read_text()) if rs_path.exists() else {}).items():
        if len(curve) > len(rs_curves.get(key, [])):
            rs_curves[key] = curve
    runs = [r for r in store["runs"] if r["method"] in METHODS]
    if not args.render:  # random search at every run's budget (only the missing points are evaluated)
        for r in runs:
            key = rs_key(settings, r["variant"], r["seed"])
            if r["num_evaluations"] > len(rs_curves.get(key, [])):
                rs_curves[key] = extend_rs_curve(
                    settings, r["variant"], r["seed"], rs_curves.get(key, []), r["num_evaluations"]
                )
                rs_path.write_text(json.dumps(rs_curves))
    names = [n for n in VARIANTS if any(r["variant"] == n for r in runs)]
    rows = summarise(runs, names, rs_curves, settings)
    md_path.write_text(render(rows, command))
    for r in rows:
        print(
            f"{r['variant']:18s} {r['method']:20s} n={r['seeds']:2d} evals {r['evaluations']:5.0f} "
            f"loss {r['mean']:.4f} ± {r['se']:.4f} median {r['median']:.4f} | RS {r['rs_mean']:.4f} "
            f"median {r['rs_median']:.4f} | wins vs RS {r['wins_vs_rs']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
