r"""The report of the ``mixed`` experiment: ``mixed.md`` and ``mixed.json`` from the stored runs.

``summary`` computes every number of the report from the runs (mean test loss ± standard
error per method and ε, paired wins of ``tune`` against private random search on the seeds
both finished, and the pre-stated goal's verdict); ``report_text`` renders it. Every loss is a
NON-PRIVATE diagnostic, computed only to evaluate the methods.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
from pathlib import Path
from typing import Any

from benchmarks.dpsgd_hitrate import hit_rate
from benchmarks.mixed_task import (
    DP_HYPO,
    PRIVATE_METHODS,
    PRIVATE_RS,
    TUNE,
    TUNE_AUTO,
    Settings,
    methods,
    quick_settings,
)
from benchmarks.runs import Run, mean_se

__all__ = [
    "FULL_COMMAND",
    "GOAL",
    "GOAL_EPSILON",
    "GOAL_WINS",
    "HIT_RATE_GOAL",
    "REPORT_JSON",
    "REPORT_MD",
    "choice_hit_rate",
    "render_store",
    "report_text",
    "store_command",
    "summary",
    "write_report",
]

REPORT_MD, REPORT_JSON = "mixed.md", "mixed.json"
#: The command of the full run (the report of a partial store quotes it as the one that resumes).
FULL_COMMAND = "python -m benchmarks run mixed --workers 2 --out reports"
#: The goal, stated before the runs (issue 30, item 5), quoted as is.
GOAL = "`tune` below private random search in mean test loss with at least 7/10 paired wins at ε = 3 (δ = 1e-5)."
GOAL_EPSILON, GOAL_WINS = 3.0, 7
#: The auto arm's goal (issue 41, item 2): the better method on at least 8 of 10 seeds where the two differ.
HIT_RATE_GOAL = 0.8
#: The auto arm's chosen method (``extra["chosen_method"]``) → the arm that runs that method alone.
AUTO_ALTERNATIVES = {"dp_gibo": TUNE, "private_random_search": PRIVATE_RS, "dp_hypo": DP_HYPO}


def choice_hit_rate(chosen: dict[int, str], losses: dict[str, dict[int, float]]) -> dict[str, Any]:
    r"""How often ``method="auto"`` picked the better of the methods it chooses among (DP-GIBO as
    ``tune``'s enumerate arm, private random search, DP-HyPO: ``AUTO_ALTERNATIVES``), on the seeds
    where the two best differ by more than their standard error: ``dpsgd_hitrate.hit_rate``'s rule
    on test losses (lower is better).

    On the seeds where the auto arm ran and every alternative in ``losses`` ran (test loss per seed),
    the two alternatives with the lowest losses on seed ``s`` DECIDE it when their difference exceeds
    the standard error of the mean of their paired differences over those seeds (``stdev/√m``); auto
    HITS a decided seed when the method it chose there (``chosen[s]``) is the one with the lowest loss.
    With two alternatives given this compares just those two. With fewer than two common seeds nothing
    is decided (``se`` NaN).

    Returns:
        ``dpsgd_hitrate.hit_rate``'s result (``per_seed``, ``se_range``, ``hits``, ``decided``,
        ``seeds``, ``rate``, ``met``) and ``se``: the largest standard error of the seeds' pairs.
    """
    h = hit_rate(chosen, losses, candidates=AUTO_ALTERNATIVES, lower_is_better=True)
    return {**h, "se": h["se_range"][1]}


def _test_loss(run: Run) -> float:
    return float(run.extra["test_loss"])


def _cell(runs: list[Run]) -> dict[str, Any]:
    values = [_test_loss(r) for r in runs]
    m, se = mean_se(values) if values else (math.nan, math.nan)
    return {
        "mean": m,
        "se": se,
        "seeds": sorted(r.seed for r in runs),
        "test_accuracy": (sum(float(r.extra["test_accuracy"]) for r in runs) / len(runs)) if runs else math.nan,
        "evaluations": (sum(r.num_evaluations for r in runs) / len(runs)) if runs else math.nan,
    }


def summary(settings: Settings, runs: list[Run]) -> dict[str, Any]:
    r"""Every number of the report, from ``runs`` alone (NON-PRIVATE diagnostics).

    Returns:
        ``cells``: ``{method: {ε or "inf": cell}}`` (``mean``, ``se`` of the test loss,
        ``seeds``, mean ``test_accuracy`` and ``evaluations``); ``wins``: ``{ε: {"wins",
        "pairs", "mean_difference"}}`` of ``tune`` vs private random search on the seeds both
        have (a win: lower test loss); ``goal``: the verdict at ``GOAL_EPSILON``;
        ``complete_seeds``: seeds with every method's runs; ``chosen``: ``tune``'s chosen
        configurations per ε.
    """
    by: dict[tuple[str, Any], dict[int, Run]] = {}
    for r in runs:
        by.setdefault((r.method, "inf" if r.epsilon is None else _eps(r.setting)), {})[r.seed] = r
    cells: dict[str, dict[str, Any]] = {}
    for method in methods(settings):
        keys = [_eps(e) for e in settings.epsilons] if method in PRIVATE_METHODS + (TUNE_AUTO,) else ["inf"]
        cells[method] = {k: _cell(list(by.get((method, k), {}).values())) for k in keys}
    wins: dict[str, Any] = {}
    for e in settings.epsilons:
        k = _eps(e)
        a, b = by.get((TUNE, k), {}), by.get((PRIVATE_RS, k), {})
        common = sorted(set(a) & set(b))
        diffs = [_test_loss(a[s]) - _test_loss(b[s]) for s in common]
        wins[k] = {
            "wins": sum(d < 0 for d in diffs),
            "pairs": len(common),
            "mean_difference": sum(diffs) / len(diffs) if diffs else math.nan,
        }
    g = _eps(GOAL_EPSILON)
    goal: dict[str, Any] = {"text": GOAL}
    if g in wins:
        t, p = cells[TUNE][g], cells[PRIVATE_RS][g]
        below = t["mean"] < p["mean"]
        goal.update(
            below=below,
            wins=wins[g]["wins"],
            pairs=wins[g]["pairs"],
            met=bool(below and wins[g]["wins"] >= GOAL_WINS and wins[g]["pairs"] >= 10),
        )
    expected = {(m, k) for m in methods(settings) for k in cells[m]}
    complete = [s for s in settings.seeds if all(s in by.get(key, {}) for key in expected)]
    chosen = {
        k: {str(r.seed): r.extra.get("chosen_configuration") for r in by.get((TUNE, k), {}).values()}
        for k in (_eps(e) for e in settings.epsilons)
    }
    hit_rate = {}
    if TUNE_AUTO in methods(settings):  # the auto arm against its two alternatives, per ε
        for k in (_eps(e) for e in settings.epsilons):
            auto = {s: str(r.extra.get("chosen_method")) for s, r in by.get((TUNE_AUTO, k), {}).items()}
            arms = {m: {s: _test_loss(r) for s, r in by.get((m, k), {}).items()} for m in AUTO_ALTERNATIVES.values()}
            hit_rate[k] = choice_hit_rate(auto, arms)
    return {
        "cells": cells,
        "wins": wins,
        "goal": goal,
        "complete_seeds": complete,
        "chosen": chosen,
        "hit_rate": hit_rate,
    }


def _eps(value: Any) -> str:
    return "inf" if value is None or (isinstance(value, float) and math.isinf(value)) else f"{float(value):g}"


def _fmt(cell: dict[str, Any]) -> str:
    if not cell["seeds"]:
        return "—"
    se = "" if math.isnan(cell["se"]) else f" ± {cell['se']:.4f}"
    return f"{cell['mean']:.4f}{se} ({len(cell['seeds'])})"


def _auto_lines(s: Settings, runs: list[Run]) -> list[str]:
    r"""The optional ``tune (auto, proxy)`` arm in words, with the methods it chose (none when off)."""
    if not s.tune_auto_proxy:
        return []
    chosen: dict[str, dict[str, int]] = {}
    for r in runs:
        if r.method == TUNE_AUTO:
            per = chosen.setdefault(_eps(r.setting), {})
            per[str(r.extra.get("chosen_method"))] = per.get(str(r.extra.get("chosen_method")), 0) + 1
    said = "; ".join(f"ε = {k}: " + ", ".join(f"{n}× {m}" for m, n in sorted(v.items())) for k, v in chosen.items())
    return [
        f'`{TUNE_AUTO}`: `tune(..., proxy=, num_users=n)` with `method="auto"`: each configuration planned on '
        f"a PUBLIC proxy, a {s.proxy_fraction:g} slice of the training split as its users (its models trained "
        "on the rest of the training split; the training rows are not what this benchmark protects), then DP-GIBO "
        "per configuration, private random search and DP-HyPO over the public encoding compared there "
        f"({s.proxy_repeats} paired repeats) and the recommended one run at (ε, δ). Methods chosen: "
        f"{said or 'none yet'}."
    ]


def report_text(settings: Settings, context: dict, runs: list[Run], command: str) -> str:
    r"""The Markdown report."""
    s, data = settings, summary(settings, runs)
    eps_keys = [_eps(e) for e in s.epsilons]
    lines = [
        "# Mixed search space: `tune` vs private selections on the digits MLP",
        "",
        f"Command: `{command}` (resume the remaining seeds with the same command).",
        f"Machine: {platform.node()} ({platform.machine()}), {context.get('execution', '?')}; "
        f"date {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; "
        + (
            f"wall time of this command {context['wall_s']:.0f} s."
            if math.isfinite(context.get("wall_s", math.nan))
            else "rendered from the run store (`python -m benchmarks.mixed_report OUT`)."
        ),
        "",
        f"**Goal, stated before the runs:** {GOAL}",
        "",
        f"Seeds with every method finished: {len(data['complete_seeds'])} of {len(s.seeds)} "
        f"({', '.join(map(str, data['complete_seeds'])) or 'none'}).",
        "",
        f"Task: `{s.dataset}`, MLP with one hidden layer; optimizer ∈ {{sgd (momentum 0.9), adam}} and activation ∈ "
        f"{{relu, tanh}} categorical ({context.get('configurations', '?')} configurations), width ∈ "
        f"[{s.width_low}, {s.width_high}] integer, lr ∈ [1e-4, 0.3] and weight decay ∈ [1e-6, 0.1] (log), "
        f"dropout ∈ [0, 0.5]; {s.epochs} epochs; users = validation examples (loss capped at {s.loss_cap:g}).",
        f"`tune`: strategy `enumerate`, `num_iterations={s.iterations}`, otherwise `TUNE_DEFAULTS` "
        f"(selection share {s.selection_share:g}, C = {s.loss_clip:g}). Private random search and DP-HyPO sample "
        f"the mixed space through its public encoding: the {context.get('dim', '?')} relaxed coordinates plus one "
        f"cube coordinate per categorical split into equal shares ({context.get('encoded_dim', '?')} in all; uniform "
        "over each categorical, the width rounded); E[K] = the budget, C as `tune`. Budget of every method: "
        "`tune`'s evaluations at the first ε (every run's points and the scored final points).",
        *_auto_lines(s, runs),
        "",
        "## Test loss (mean ± standard error, number of seeds)",
        "",
        "| method | " + " | ".join(f"ε = {k}" for k in eps_keys) + " | non-private |",
        "|---|" + "---|" * (len(eps_keys) + 1),
    ]
    for method in methods(settings):
        c = data["cells"][method]
        if method in PRIVATE_METHODS + (TUNE_AUTO,):
            lines.append(f"| {method} | " + " | ".join(_fmt(c[k]) for k in eps_keys) + " | |")
        else:
            lines.append(f"| {method} | " + " | " * len(eps_keys) + f"{_fmt(c['inf'])} |")
    lines += [
        "",
        "## Paired wins of `tune` over private random search (lower test loss, same seed)",
        "",
        "| ε | wins / pairs | mean difference (tune − private RS) |",
        "|---|---|---|",
    ]
    for k in eps_keys:
        w = data["wins"][k]
        lines.append(f"| {k} | {w['wins']} / {w['pairs']} | {w['mean_difference']:+.4f} |")
    goal = data["goal"]
    if "met" in goal:
        verdict = "met" if goal["met"] else "NOT met"
        lines += [
            "",
            f"**Goal {verdict}**: at ε = {GOAL_EPSILON:g}, `tune`'s mean test loss is "
            f"{'below' if goal['below'] else 'not below'} private random search's, with {goal['wins']} "
            f"paired wins of {goal['pairs']} (the goal needs at least {GOAL_WINS} paired wins of 10 seeds).",
        ]
    if data["hit_rate"]:
        lines += [
            "",
            f"## How often `{TUNE_AUTO}` picked the better method",
            "",
            "On each seed the two methods with the lowest test loss among `tune` (DP-GIBO), private random search "
            "and DP-HyPO decide the seed when they differ by more than the standard error of their paired "
            "differences over the seeds; auto hits a decided seed when it chose the one with the lowest loss "
            f"(goal, issue 41: at least {HIT_RATE_GOAL:.0%}, 8 of 10).",
            "",
            "| ε | hits / decided seeds | seeds | s.e. of the differences (largest) | goal |",
            "|---|---|---|---|---|",
        ]
        for k, h in data["hit_rate"].items():
            se = "n/a" if math.isnan(h["se"]) else f"{h['se']:.4f}"
            lines.append(
                f"| {k} | {h['hits']} / {h['decided']} | {h['seeds']} | {se} | {'met' if h['met'] else 'not met'} |"
            )
    lines += ["", "## Configurations `tune` chose", ""]
    for k in eps_keys:
        chosen = data["chosen"][k]
        counts: dict[str, int] = {}
        for c in chosen.values():
            label = ", ".join(f"{k}={v}" for k, v in sorted((c or {}).items()))
            counts[label] = counts.get(label, 0) + 1
        lines.append(f"- ε = {k}: " + ("; ".join(f"{n}× {lab}" for lab, n in sorted(counts.items())) or "none"))
    lines += [
        "",
        "Every loss here is a NON-PRIVATE diagnostic (validation and test losses of the model retrained "
        "at each method's released point); the private methods' guarantees are on the validation users.",
        "",
    ]
    return "\n".join(lines)


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""Write ``out/mixed.md`` and ``out/mixed.json``; returns the Markdown path."""
    out.mkdir(parents=True, exist_ok=True)
    data = summary(settings, runs)
    meta = {
        "command": command,
        "machine": platform.node(),
        "execution": context.get("execution"),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "wall_s": context.get("wall_s"),
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(settings).items()},
    }
    (out / REPORT_JSON).write_text(json.dumps({**meta, **data}, indent=1, default=str, allow_nan=True) + "\n")
    path = out / REPORT_MD
    path.write_text(report_text(settings, context, runs, command))
    return path


def store_command(settings: Settings, out: Path) -> str:
    r"""The command that made (and resumes) a store: ``--quick`` for a quick store, and ``--set``
    for each setting off the defaults of its mode."""
    quick = settings.mode == "quick"
    default = quick_settings() if quick else Settings()
    changed = [
        f"--set {k}={','.join(map(str, v)) if isinstance(v, tuple) else v}"
        for k, v in vars(settings).items()
        if getattr(default, k) != v
    ]
    return " ".join(
        ["python -m benchmarks run mixed --workers 2", *(["--quick"] if quick else []), *changed, f"--out {out}"]
    )


def render_store(out: Path, command: str | None = None, note: str = "") -> Path:
    r"""Write the report of the runs stored in ``out/runs-mixed.jsonl`` so far (a partial run too).

    ``python -m benchmarks run mixed --render`` needs every job stored; this renders whatever
    finished, with the settings of the store's header, and the report counts seeds per cell.

    Args:
        out: The output directory holding the run store.
        command: The command quoted in the report (the one that resumes the rest); by default the
            one the store's settings and ``out`` give (``store_command``).
        note: How the runs were made (the report's "execution").
    """
    lines = (out / "runs-mixed.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    fields: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in header["settings"].items()}
    settings = Settings(**fields)
    runs = [Run(**json.loads(line)["run"]) for line in lines[1:] if line.strip()]
    context = {**header["context"], "execution": note or "partial store", "wall_s": math.nan}
    return write_report(settings, context, runs, out, command or store_command(settings, out))


if __name__ == "__main__":  # python -m benchmarks.mixed_report OUT [NOTE]
    import sys

    print(render_store(Path(sys.argv[1]), note=" ".join(sys.argv[2:])).read_text())
