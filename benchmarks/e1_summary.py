r"""The E.1 investigation's summary table (``e1``): each run against random search at its own budget."""

from __future__ import annotations

import math
import statistics

from benchmarks import paper
from benchmarks.e1_protocol import METHODS, VARIANTS, rs_key
from benchmarks.runs import mean_se


def summarise(
    records: list[dict], variant_names: list[str], rs_curves: dict[str, list[float]], settings: paper.Settings
) -> list[dict]:
    r"""Per variant and method: mean ± s.e., median, and wins per seed against random search.

    Random search is read at each run's own evaluation count on the same seed and search box
    (``rs_curves``); a win is a strictly lower final loss. Runs whose budget exceeds the
    stored curve are left out of the win count (``rs_missing``).
    """
    rows = []
    for name in variant_names:
        for method in METHODS[:2]:
            runs = [r for r in records if r["variant"] == name and r["method"] == method]
            if not runs:
                continue
            losses = [r["final_loss"] for r in runs]
            m, se = mean_se(losses)
            rs, wins, missing = [], 0, 0
            for r in runs:
                curve = rs_curves.get(rs_key(settings, name, r["seed"]), [])
                if r["num_evaluations"] > len(curve):
                    missing += 1
                    continue
                rs.append(curve[r["num_evaluations"] - 1])
                wins += r["final_loss"] < rs[-1]
            rs_m, rs_se = mean_se(rs) if rs else (math.nan, math.nan)
            rows.append(
                dict(
                    variant=name,
                    method=method,
                    seeds=len(runs),
                    mean=m,
                    se=se,
                    median=statistics.median(losses),
                    evaluations=statistics.fmean(r["num_evaluations"] for r in runs),
                    rs_mean=rs_m,
                    rs_se=rs_se,
                    rs_median=statistics.median(rs) if rs else math.nan,
                    wins_vs_rs=f"{wins}/{len(rs)}",
                    rs_missing=missing,
                    per_seed={r["seed"]: r["final_loss"] for r in runs},
                )
            )
    return rows


def _pm(m: float, se: float) -> str:
    return f"{m:.3f}" if math.isnan(se) else f"{m:.3f} ± {se:.3f}"


def render(rows: list[dict], command: str) -> str:
    r"""The summary table as markdown."""
    lines = [
        "# E.1 investigation: runs (benchmarks.e1)",
        "",
        f"Command: `{command}`",
        "",
        "Final validation loss (NON-PRIVATE diagnostic) of the returned point (the last iterate), mean ± s.e. "
        "over seeds; random search (RS) is read at each run's own evaluation count on the same seed and "
        "box; wins = seeds where the method is strictly lower than RS.",
        "",
        "| variant | change | method | seeds | evaluations (mean) | final loss | median | RS at same budgets | "
        "RS median | wins vs RS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        missing = f" ({r['rs_missing']} without RS)" if r["rs_missing"] else ""
        lines.append(
            f"| {r['variant']} | {VARIANTS[r['variant']].note} | {r['method']} | {r['seeds']} | "
            f"{r['evaluations']:.0f} | {_pm(r['mean'], r['se'])} | {r['median']:.4f} | "
            f"{_pm(r['rs_mean'], r['rs_se'])} | {r['rs_median']:.4f} | {r['wins_vs_rs']}{missing} |"
        )
    lines += [
        "",
        "Per seed (final loss):",
        "",
        "| variant | method | "
        + " | ".join(f"seed {s}" for s in sorted({s for r in rows for s in r["per_seed"]}))
        + " |",
    ]
    seeds = sorted({s for r in rows for s in r["per_seed"]})
    lines.append("|---|---|" + "---|" * len(seeds))
    for r in rows:
        cells = [f"{r['per_seed'][s]:.4f}" if s in r["per_seed"] else "" for s in seeds]
        lines.append(f"| {r['variant']} | {r['method']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
