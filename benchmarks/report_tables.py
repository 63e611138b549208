r"""Markdown tables of runs and the paired findings under them (``results.md`` and the other reports).

Every table is built by ``table(groups, columns)``: one row per group of runs (a method,
a swept value), one cell per column function. Findings compare final losses paired by
seed. All losses are NON-PRIVATE diagnostics.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable

import torch

from benchmarks.runs import Run, format_mean_se, mean_se

#: A table column: its header and ``cell(label, runs) -> text`` for one group of runs.
Column = tuple[str, Callable[[str, list[Run]], str]]


def markdown_row(cells: Iterable[object]) -> str:
    r"""``| a | b | ... |`` (an empty cell is ``| |``)."""
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def table(groups: dict[str, list[Run]], columns: list[Column], extra_rows: Iterable[list[object]] = ()) -> str:
    r"""A markdown table with one row per non-empty group of runs.

    Args:
        groups: Row label -> the runs of that row, in row order.
        columns: ``(header, cell)`` pairs; ``cell(label, runs)`` gives the row's text.
        extra_rows: Rows of ready cells appended at the end (e.g. reference values).

    Returns:
        The table's lines joined by newlines.
    """
    lines = [markdown_row(header for header, _ in columns), "|" + "|".join("---" for _ in columns) + "|"]
    lines += [markdown_row(cell(label, runs) for _, cell in columns) for label, runs in groups.items() if runs]
    lines += [markdown_row(row) for row in extra_rows]
    return "\n".join(lines)


def final_loss(run: Run) -> float:
    return run.final_loss


def label_column(header: str = "method") -> Column:
    r"""The group's label."""
    return header, lambda label, runs: label


def mean_se_column(header: str, value: Callable[[Run], float] = final_loss, digits: int = 4) -> Column:
    r"""``mean ± s.e.`` of ``value`` over the group's runs."""
    return header, lambda label, runs: format_mean_se([value(r) for r in runs], digits)


def mean_column(header: str, value: Callable[[Run], float], spec: str = ".0f") -> Column:
    r"""Mean of ``value`` over the group's runs, formatted with ``spec``."""
    return header, lambda label, runs: f"{statistics.fmean(value(r) for r in runs):{spec}}"


def median_column(header: str = "median", value: Callable[[Run], float] = final_loss) -> Column:
    r"""Median of ``value`` over the group's runs (4 significant digits)."""
    return header, lambda label, runs: f"{statistics.median(value(r) for r in runs):.4g}"


def seeds_column(header: str = "seeds") -> Column:
    r"""Number of runs in the group."""
    return header, lambda label, runs: str(len(runs))


EVALUATIONS_MEAN = mean_column("evaluations (mean)", lambda r: r.num_evaluations)
FINAL_LOSS = mean_se_column("final validation loss (mean ± s.e.)")
WALL_TIME = mean_column("wall time per run (s)", lambda r: r.wall_s, ".1f")


def wins_column(header: str, reference: dict[int, float], reference_label: str, lower: bool) -> Column:
    r"""``k/n``: seeds where the reference's final loss is lower (``lower``) or the row's is; ``—`` on its row."""

    def cell(label: str, runs: list[Run]) -> str:
        paired = [r for r in runs if r.seed in reference]
        if label == reference_label or not paired:
            return "—"
        if lower:
            return f"{sum(reference[r.seed] < r.final_loss for r in paired)}/{len(paired)}"
        return f"{sum(r.final_loss < reference[r.seed] for r in paired)}/{len(paired)}"

    return header, cell


def reference_row(label: str, runs: list[Run], key: str, num_columns: int, evals: str = "") -> list[object]:
    r"""A ``(reference)`` row: mean ± s.e. and median of ``run.extra[key]`` under the loss columns."""
    values = [r.extra[key] for r in runs]
    row = [
        f"(reference) {label}",
        "",
        evals,
        format_mean_se(values),
        f"{statistics.median(values):.4g}",
        "",
        len(runs),
        "",
    ]
    return row[:num_columns]


def compare_sentence(name_a: str, a: list[float], name_b: str, b: list[float]) -> tuple[bool, str]:
    r"""Whether mean(a) < mean(b), with the difference in units of its standard error."""
    ma, sa = mean_se(a)
    mb, sb = mean_se(b)
    se = math.sqrt((0 if math.isnan(sa) else sa) ** 2 + (0 if math.isnan(sb) else sb) ** 2)
    z_txt = f", {(mb - ma) / se:+.1f} s.e." if se > 0 else ", one seed: no s.e."
    return ma < mb, f"{name_a} {ma:.4g} vs {name_b} {mb:.4g} (difference {mb - ma:+.3g}{z_txt})"


def paired_finding(what: str, a_name: str, a_runs: list[Run], b_name: str, b_runs: list[Run]) -> str:
    r"""A finding comparing final losses paired by seed: mean, median and seeds where ``a`` is lower."""
    b_by_seed = {r.seed: r.final_loss for r in b_runs}
    pairs = [(r.final_loss, b_by_seed[r.seed]) for r in a_runs if r.seed in b_by_seed]
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    mean_ok, txt = compare_sentence(a_name, a, b_name, b)
    wins = sum(x < y for x, y in pairs)
    median_txt = f"medians {statistics.median(a):.4g} vs {statistics.median(b):.4g}"
    majority = wins > len(pairs) / 2
    status = "Matches" if mean_ok and majority else "Partly matches" if mean_ok or majority else "**Does NOT match**"
    return (
        f"{status} {what}: {a_name} lower on {wins}/{len(pairs)} seeds; means {txt}; {median_txt}"
        "; 'matches' needs both a lower mean and a majority of seeds."
    )


def threads_text() -> str:
    r"""``"N torch thread(s)"`` of this process."""
    n = torch.get_num_threads()
    return f"{n} torch thread{'s' if n != 1 else ''}"


def timing_table(runs: list[Run]) -> str:
    r"""Total and per-run wall time by experiment and method (reused runs count as 0)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    reused: dict[tuple[str, str], int] = defaultdict(int)
    for r in runs:
        if r.extra.get("reused"):
            reused[(r.experiment, r.method)] += 1
        else:
            groups[(r.experiment, r.method)].append(r.wall_s)
    rows = ["| experiment | method | runs | total (s) | per run (s) |", "|---|---|---|---|---|"]
    for (exp, method), walls in groups.items():
        rows.append(markdown_row([exp, method, len(walls), f"{sum(walls):.1f}", f"{statistics.fmean(walls):.1f}"]))
    for (exp, method), k in reused.items():
        if (exp, method) not in groups:
            rows.append(markdown_row([exp, method, f"{k} (reused)", 0, "—"]))
    return "\n".join(rows)
