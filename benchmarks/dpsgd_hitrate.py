r"""How often the ``dpsgd`` benchmark's ``tune(method="auto")`` arm chose the better method (issue 41, item 2).

The auto arm stores the method it chose (``extra["chosen_method"]``); each method it may choose
has its own arm (``CANDIDATES``), run on the same seed, data set and ε. ``hit_rate`` compares,
per seed, the candidate arms' test accuracy (a NON-PRIVATE diagnostic): on seed ``s`` the two
best candidate arms ``a`` and ``b`` (``acc_a(s) ≥ acc_b(s)``) DECIDE the seed when
``acc_a(s) − acc_b(s)`` exceeds the standard error of the paired differences ``acc_a − acc_b``
over the cell's seeds; auto HITS a decided seed when the method it chose there is ``a``'s (on a
seed that is not decided, a tie for the best counts as a hit in the per-seed marks; it does not
enter the rate). A chosen method with no arm of its own (``"untuned"``) is a miss on a decided
seed. ``mixed_report.choice_hit_rate`` applies the same rule to the ``mixed`` benchmark's test
losses (its three candidates: DP-GIBO, private random search, DP-HyPO).

The arms run each method at the benchmark's settings (``E[K] = mean_trials``, ``configurations``
points), and so does ``tune(method="auto")``'s arm (``dpsgd_arms.tune_auto``; the auto runs of
``reports/dpsgd.md`` predate that and ran at ``tune``'s defaults, ``E[K] = 4``, 8 configurations).
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.runs import mean_se

__all__ = ["AUTO_ARM", "CANDIDATES", "HIT_RATE_GOAL", "HIT_RATE_GOAL_TEXT", "hit_rate", "hit_rate_lines"]

#: The arm that runs ``tune(method="auto", protect="training", proxy=...)``.
AUTO_ARM = "tune auto (proxy)"
#: The method auto may choose (``result.method``) → the arm that runs that method alone.
CANDIDATES = {
    "training_selection": "PS-profile geometric",
    "proxy_then_train": "proxy then train",
    "subsample_tuning": "subsample then train",
}
_SHORT = {"training_selection": "S", "proxy_then_train": "P", "subsample_tuning": "U"}
#: The goal (issue 41, item 2), quoted, and the rate it asks for.
HIT_RATE_GOAL_TEXT = (
    "the better method on at least 8 of 10 seeds where the two differ by more than their standard error"
)
HIT_RATE_GOAL = 0.8


def hit_rate(
    chosen: dict[int, str],
    accuracy: dict[str, dict[int, float]],
    candidates: dict[str, str] | None = None,
    lower_is_better: bool = False,
) -> dict[str, Any]:
    r"""The auto arm's hit rate in one cell (see the module docstring).

    Args:
        chosen: seed → the method the auto arm chose on it.
        accuracy: candidate arm → seed → its score: test accuracy (higher is better), or with
            ``lower_is_better`` a loss; non-finite values drop the seed, an arm without values is left out.
        candidates: method → its arm (``CANDIDATES`` by default; ``mixed_report`` passes its own).
        lower_is_better: Whether a lower score is better (the ``mixed`` benchmark's test loss).

    Returns:
        ``{"per_seed", "se_range", "hits", "decided", "seeds", "rate", "met"}``: ``per_seed`` maps each
        seed that every candidate arm and the auto arm finished to ``{"chosen", "best", "second",
        "difference", "se", "decided", "hit"}`` (``difference ≥ 0``: better minus second); ``se_range``
        the smallest and largest ``se`` of the seeds; ``rate = hits/decided`` (NaN when nothing is decided); ``met``:
        ``rate ≥ HIT_RATE_GOAL`` with at least one decided seed.
    """
    candidates = CANDIDATES if candidates is None else candidates
    sign = -1.0 if lower_is_better else 1.0
    score = {a: {s: sign * float(v) for s, v in accuracy[a].items()} for a in candidates.values() if accuracy.get(a)}
    arms = list(score)
    seeds = sorted(s for s in chosen if all(s in score[a] and math.isfinite(score[a][s]) for a in arms))
    per_seed: dict[int, dict[str, Any]] = {}
    if len(arms) >= 2:
        for s in seeds:
            best, second = sorted(arms, key=lambda a: score[a][s], reverse=True)[:2]
            diffs = [score[best][t] - score[second][t] for t in seeds]
            se = mean_se(diffs)[1] if len(diffs) > 1 else math.nan
            difference = score[best][s] - score[second][s]
            is_decided = difference > se  # NaN se: not decided
            per_seed[s] = {
                "chosen": chosen[s],
                "best": best,
                "second": second,
                "difference": difference,
                "se": se,
                "decided": is_decided,
                "hit": candidates.get(chosen[s]) in arms and score[candidates[chosen[s]]][s] == score[best][s],
            }
    decided = [s for s, row in per_seed.items() if row["decided"]]
    hits = sum(per_seed[s]["hit"] for s in decided)
    rate = hits / len(decided) if decided else math.nan
    ses = [row["se"] for row in per_seed.values() if not math.isnan(row["se"])]
    return {
        "per_seed": per_seed,
        "se_range": (min(ses), max(ses)) if ses else (math.nan, math.nan),
        "hits": hits,
        "decided": len(decided),
        "seeds": len(per_seed),
        "rate": rate,
        "met": bool(decided) and rate >= HIT_RATE_GOAL,
    }


def hit_rate_lines(cells: dict[str, dict[str, Any]], seeds: list[int]) -> list[str]:
    r"""The report's section: the goal, then per cell (``"digits ε=3"`` → ``hit_rate``'s result) one
    row of per-seed choices and one row of the hit rate; the pooled rate last."""
    lines = [
        f"## How often `{AUTO_ARM}` chose the better method (issue 41, item 2)",
        "",
        f"Goal (issue 41, item 2): {HIT_RATE_GOAL_TEXT} (a rate of at least {HIT_RATE_GOAL:.0%} of the decided "
        "seeds). The auto arm's stored record names the method it chose; each candidate has its own arm: "
        + ", ".join(f"`{m}` → {a} ({_SHORT[m]})" for m, a in CANDIDATES.items())
        + ". On each seed the two candidate arms with the highest test accuracy (NON-PRIVATE) decide the seed when "
        "they differ by more than the standard error of their paired differences over the cell's seeds; auto hits "
        "a decided seed when it chose the better one. The arms run each method at this benchmark's settings "
        "(E[K] = 10, 10 configurations), and so does auto's arm (its runs made before 2026-11-29 14:00 UTC "
        "ran at `tune`'s defaults, E[K] = 4, 8 configurations: those measure whether auto picked the better kind "
        "of method).",
        "",
        "Per seed: the chosen method (S, P, U as above), ✓ if its arm was the best candidate on that seed, ✗ if "
        "not; in brackets when the seed is not decided.",
        "",
        "| cell | " + " | ".join(f"seed {s}" for s in seeds) + " | hits / decided | seeds | goal |",
        "|---|" + "---|" * (len(seeds) + 3),
    ]
    hits = decided = 0
    for key, h in cells.items():
        marks = []
        for s in seeds:
            row = h["per_seed"].get(s)
            if row is None:
                marks.append("—")
                continue
            mark = f"{_SHORT.get(row['chosen'], row['chosen'])} {'✓' if row['hit'] else '✗'}"
            marks.append(mark if row["decided"] else f"[{mark}]")
        verdict = "met" if h["met"] else ("no decided seed" if not h["decided"] else "NOT met")
        lines.append(
            f"| {key} | " + " | ".join(marks) + f" | {h['hits']} / {h['decided']} | {h['seeds']} | {verdict} |"
        )
        hits, decided = hits + h["hits"], decided + h["decided"]
    if decided:
        lines += [
            "",
            f"**Pooled over the cells: {hits} hits of {decided} decided seeds ({hits / decided:.0%}); the goal is "
            f"{'met' if hits / decided >= HIT_RATE_GOAL else 'NOT met'}** "
            f"({sum(h['met'] for h in cells.values())} of {len(cells)} cells meet it on their own).",
        ]
    return [*lines, ""]
