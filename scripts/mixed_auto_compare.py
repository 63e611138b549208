r"""The mixed benchmark's auto arm before and after a fix to the method choice, side by side (issue 41).

``python scripts/mixed_auto_compare.py OLD_STORE NEW_STORE [ARM_REPEATS] > OUT.md`` reads two run stores
of ``python -m benchmarks run mixed --set tune_auto_proxy=true`` (the other arms' runs are the OLD
store's; the NEW store holds the rerun auto jobs, ``benchmarks.rerun``) and prints, per ε and seed where
the new auto arm ran: the three private arms' test losses, each auto arm's chosen method and test loss,
whether the seed is decided and hit (``benchmarks.mixed_report.choice_hit_rate``: the standard errors
over every seed the arms ran, as in the old report, the hits counted over the seeds the new arm ran),
and the means. ``ARM_REPEATS`` (JSON lines ``{seed, eps, rep, method, test_loss, K}``) adds the arms
rerun with other noise seeds: is a seed's best arm the same on another draw? Every loss is a
NON-PRIVATE diagnostic.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.mixed_report import choice_hit_rate

AUTO = "tune (auto, proxy)"
ARMS = ("tune (enumerate)", "private random search", "DP-HyPO")
SHORT = {"dp_gibo": "DP-GIBO", "private_random_search": "PRS", "dp_hypo": "DP-HyPO"}
ARM_SHORT = {"tune (enumerate)": "DP-GIBO", "private random search": "PRS", "DP-HyPO": "DP-HyPO"}


def load(path: str) -> dict[tuple[str, int, float], dict[str, Any]]:
    runs = {}
    for line in Path(path).read_text().splitlines():
        record = json.loads(line)
        if "run" in record:
            r = record["run"]
            runs[(r["method"], int(r["seed"]), float(r["setting"]))] = r
    return runs


def mean_se(values: list[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, math.nan
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values))


def main(old_path: str, new_path: str, repeats_path: str | None = None) -> str:
    old, new = load(old_path), load(new_path)
    lines: list[str] = []
    for eps in sorted({k[2] for k in new if k[0] == AUTO}):
        seeds = sorted(k[1] for k in new if k[0] == AUTO and k[2] == eps)
        every = sorted(k[1] for k in old if k[0] == AUTO and k[2] == eps)  # the s.e. over all of the old seeds
        arms = {a: {s: float(old[(a, s, eps)]["extra"]["test_loss"]) for s in every} for a in ARMS}
        chosen = {
            name: {s: store[(AUTO, s, eps)]["extra"]["chosen_method"] for s in seeds}
            for name, store in (("old", old), ("new", new))
        }
        hits = {}
        for name, c in chosen.items():
            h = choice_hit_rate({s: c.get(s, old[(AUTO, s, eps)]["extra"]["chosen_method"]) for s in every}, arms)
            in_new = [s for s in seeds if h["per_seed"][s]["decided"]]
            hits[name] = {**h, "decided": len(in_new), "hits": sum(h["per_seed"][s]["hit"] for s in in_new)}
        lines += [
            f"### ε = {eps:g} ({len(seeds)} seeds: {', '.join(map(str, seeds))})",
            "",
            "| seed | DP-GIBO (tune) | PRS | DP-HyPO | decided: best (margin, s.e.) | old auto: chose, test loss | "
            "new auto: chose, test loss |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in seeds:
            row = hits["new"]["per_seed"][s]
            decided = (
                f"{ARM_SHORT[row['best']]} ({row['difference']:.4f}, {row['se']:.4f})"
                if row["decided"]
                else f"no ({row['difference']:.4f} ≤ {row['se']:.4f})"
            )
            cells = []
            for name, store in (("old", old), ("new", new)):
                hit = hits[name]["per_seed"][s]
                mark = (" ✓" if hit["hit"] else " ✗") if hit["decided"] else ""
                loss = float(store[(AUTO, s, eps)]["extra"]["test_loss"])
                cells.append(f"{SHORT[chosen[name][s]]}{mark}, {loss:.4f}")
            lines.append(
                f"| {s} | {arms[ARMS[0]][s]:.4f} | {arms[ARMS[1]][s]:.4f} | {arms[ARMS[2]][s]:.4f} | {decided} | "
                f"{cells[0]} | {cells[1]} |"
            )
        lines.append("")
        for name, store in (("old", old), ("new", new)):
            m, se = mean_se([float(store[(AUTO, s, eps)]["extra"]["test_loss"]) for s in seeds])
            h = hits[name]
            counts: dict[str, int] = defaultdict(int)
            for s in seeds:
                counts[SHORT[chosen[name][s]]] += 1
            lines.append(
                f"- {name} auto: {h['hits']} hits of {h['decided']} decided seeds; mean test loss {m:.4f} ± {se:.4f}; "
                f"chose {', '.join(f'{k} {v}×' for k, v in sorted(counts.items()))}"
            )
        for a in ARMS:
            m, se = mean_se([arms[a][s] for s in seeds])
            lines.append(f"- arm {ARM_SHORT[a]}: mean test loss {m:.4f} ± {se:.4f} (same seeds)")
        lines.append("")
    if repeats_path:
        lines += _repeats(old, new, repeats_path)
    return "\n".join(lines)


def _repeats(
    old: dict[tuple[str, int, float], dict[str, Any]], new: dict[tuple[str, int, float], dict[str, Any]], path: str
) -> list[str]:
    draws: dict[tuple[int, float], dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        draws[(int(r["seed"]), float(r["eps"]))][r["method"]][int(r["rep"])] = float(r["test_loss"])
    lines = [
        "### The arms on other noise draws (same seed, same data; draw 0 is the stored run)",
        "",
        "Per seed: each arm's test loss on every draw, the arm lowest on each draw, and each arm's mean ± s.e.",
        "over the draws. The better arm IN MEAN decides the seed when the two lowest means differ by more than",
        "the standard error of their difference (independent draws: √(s.e.₁² + s.e.₂²)).",
        "",
        "| ε | seed | arm | test loss per draw (0 = stored) | mean ± s.e. | lowest arm per draw |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = []
    for (seed, eps), by_arm in sorted(draws.items()):
        reps = sorted(set.intersection(*(set(v) for v in by_arm.values())))
        full = {a: {0: float(old[(a, seed, eps)]["extra"]["test_loss"]), **by_arm[a]} for a in by_arm}
        best = [min(full, key=lambda a: full[a][r]) for r in [0, *reps]]  # noqa: B023 (used at once)
        stats = {a: mean_se([full[a][r] for r in [0, *reps]]) for a in full}
        for i, a in enumerate(sorted(full)):
            values = ", ".join(f"{full[a][r]:.4f}" for r in [0, *reps])
            tail = ", ".join(ARM_SHORT[b] for b in best) if i == 0 else ""
            lines.append(
                f"| {eps:g} | {seed} | {ARM_SHORT[a]} | {values} | {stats[a][0]:.4f} ± {stats[a][1]:.4f} | {tail} |"
            )
        first, second = sorted(stats, key=lambda a: stats[a][0])[:2]
        se = math.hypot(stats[first][1], stats[second][1])
        margin = stats[second][0] - stats[first][0]
        picks = {
            name: SHORT[store[(AUTO, seed, eps)]["extra"]["chosen_method"]]
            for name, store in (("old", old), ("new", new))
            if (AUTO, seed, eps) in store
        }
        verdicts.append(
            f"- ε = {eps:g}, seed {seed}: better in mean {ARM_SHORT[first]} over {ARM_SHORT[second]} by "
            f"{margin:.4f} (s.e. {se:.4f}; {'decided' if margin > se else 'not decided'}); the stored single draws "
            f"named {ARM_SHORT[best[0]]}; auto chose " + ", ".join(f"{k}: {v}" for k, v in picks.items())
        )
    return [*lines, "", *verdicts, ""]


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
