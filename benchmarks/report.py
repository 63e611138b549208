r"""``results.md`` of a reproduction: settings, one table per experiment, findings, timing.

The sections are built in ``report_settings`` (settings and deviations from the paper),
``report_gp`` (sections 1–4) and ``report_small`` (sections 5–6), their tables with the
helpers of ``report_tables``. All losses are NON-PRIVATE diagnostics.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from benchmarks.paper import Settings
from benchmarks.report_gp import gp_sections
from benchmarks.report_settings import settings_section
from benchmarks.report_small import small_problem_sections
from benchmarks.report_tables import threads_text, timing_table
from benchmarks.runs import Run

__all__ = ["experiment_sections", "settings_section", "write_report"]


def experiment_sections(s: Settings, runs: list[Run]) -> tuple[list[str], list[str]]:
    r"""The tables of sections 1–6 and the findings (agreement with the paper's claims)."""
    gp_lines, gp_findings = gp_sections(s, runs)
    small_lines, small_findings = small_problem_sections(s, runs)
    return gp_lines + small_lines, gp_findings + small_findings


def write_report(
    settings: Settings,
    runs: list[Run],
    pilot: dict,
    out: Path,
    total_wall: float,
    argv: list[str],
    note: str = "",
    execution: str | None = None,
) -> str:
    r"""Write ``out/results.md`` and return its text.

    Args:
        settings: The settings the runs were made with.
        runs: The runs.
        pilot: The pilot's clip bounds (``{}`` when none ran).
        out: The output directory (its PNG files are listed).
        total_wall: Wall time of the command(s) in seconds.
        argv: The command's arguments.
        note: A line under the wall time (re-rendering, merging).
        execution: The processes and threads (default: this process's torch threads).

    Returns:
        The text of ``results.md``.
    """
    lines = [
        f"# DP-GIBO paper reproduction ({settings.mode} mode)\n",
        f"Command: `python scripts/reproduce_paper.py {' '.join(argv)}`  ",
        f"Total wall time: {total_wall:.0f} s on {execution or threads_text()} "
        f"({platform.machine()}, torch {torch.__version__}).  ",
    ]
    if note:
        lines.append(note + "  ")
    lines.append(
        "All losses below are NON-PRIVATE diagnostics (noise-free validation loss of what a method returned).\n"
    )
    lines += settings_section(settings, runs, pilot)
    sections, findings = experiment_sections(settings, runs)
    lines += sections
    lines.append("## Findings (where the results agree or disagree with the paper)\n")
    lines += [f"- {finding}" for finding in findings]
    lines += ["", "## Timing\n", timing_table(runs), ""]
    lines.append("Plots: " + ", ".join(f"`{n}`" for n in sorted(x.name for x in out.glob("*.png"))))
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    return text
