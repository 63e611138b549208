r"""Where, when and how a measurement was taken: the header of every benchmark report.

Every figure quoted in the docs has a file behind it (issue 31, item 6): the scripts under
``scripts/`` that time the package write ``reports/NAME.json`` and ``reports/NAME.md``, both
starting with the same provenance, taken here once for all of them:

- the command (``python scripts/NAME.py ARGS``) and the date (UTC);
- the git revision measured (with ``(modified)`` when the working tree differs from it);
- the machine: CPU model, logical CPUs and the ones this process may use, the platform,
  and the load average when the measurement started and when it ended (a shared machine's
  load inflates absolute times; paired comparisons in one process see the same load);
- Python, torch and torch's thread count (with ``OMP_NUM_THREADS``).

Usage::

    stamp = provenance("scripts/bench_scale.py", argv)
    ...  # measure
    report = {**finished(stamp), "rows": rows}
    write_report(out, "bench_scale", report, "\n".join([*header_lines(report, "Title"), table]))
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    r"""The CPU's model name from ``/proc/cpuinfo`` (Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def git_revision(root: Path = ROOT) -> str | None:
    r"""``HEAD`` of the checkout, with ``" (modified)"`` when tracked files differ; ``None`` outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + (" (modified)" if dirty else "")


def _load() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def provenance(script: str, argv: list[str], note: str | None = None) -> dict[str, Any]:
    r"""The header fields, taken when the measurement starts.

    Args:
        script: The script's path from the repository root (``"scripts/bench_scale.py"``).
        argv: Its arguments, as given (``sys.argv[1:]`` on the command line).
        note: A sentence for the report's reader (why this size was run, say), or ``None``.
    """
    return {
        "note": note,
        "command": shlex.join(["python", script, *argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_revision": git_revision(),
        "machine": {
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "platform": platform.platform(),
            "load_average_start": _load(),
        },
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "_started": time.perf_counter(),
    }


def finished(stamp: dict[str, Any]) -> dict[str, Any]:
    r"""The header with the load average at the end and the total wall time added."""
    out = {k: v for k, v in stamp.items() if k != "_started"}
    out["machine"] = {**stamp["machine"], "load_average_end": _load()}
    out["wall_s"] = round(time.perf_counter() - stamp["_started"], 1)
    return out


def header_lines(report: dict[str, Any], title: str) -> list[str]:
    r"""The markdown header of a report: title, command, date, revision, machine, versions."""
    m = report["machine"]

    def load(values: list[float] | None) -> str:
        return " / ".join(f"{x:.2f}" for x in values) if values else "unknown"

    threads = report["torch_threads"]
    loaded = (
        []
        if not m["load_average_start"] or m["load_average_start"][0] <= m["cpus_usable"]
        else [
            f"**Loaded machine**: the 1-minute load average at the start ({m['load_average_start'][0]:.2f}) exceeded "
            f"the {m['cpus_usable']} usable CPUs, so other work shared the cores: absolute times are inflated, and "
            "only ratios of timings taken side by side in one process are comparable.",
            "",
        ]
    )
    return [
        f"# {title}",
        "",
        *([f"Note: {report['note']}", ""] if report.get("note") else []),
        f"Command: `{report['command']}` (from the repository root)",
        "",
        f"Date: {report['date']}; revision `{report['git_revision']}`; total wall time {report['wall_s']:.0f} s.",
        "",
        f"Machine: {m['cpu']}, {m['cpu_count']} logical CPUs ({m['cpus_usable']} usable), {m['platform']}; "
        f"load average {load(m['load_average_start'])} at the start, {load(m.get('load_average_end'))} at the end.",
        "",
        f"Python {report['python']}, torch {report['torch']} with {threads} thread{'s' if threads != 1 else ''} "
        f"(OMP_NUM_THREADS={report['OMP_NUM_THREADS']}).",
        "",
        *loaded,
    ]


def script_meta(script: str, argv: list[str], threads: int) -> dict[str, Any]:
    r"""The short ``meta`` of a comparison script's report (``scripts/compare_*.py``).

    The command (``python SCRIPT ARGS``), machine, CPU count, torch threads, Python and torch
    versions and the date to the minute (UTC); the full header is ``provenance``.
    """
    return {
        "command": " ".join([f"python {script}", shlex.join(argv)]).rstrip(),
        "machine": platform.machine() + " " + platform.processor(),
        "cpus": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def write_report(
    out: Path, name: str, report: dict[str, Any], text: str, *, indent: int = 2, allow_nan: bool = False
) -> tuple[Path, Path]:
    r"""Write ``out/NAME.json`` (the report, plain JSON) and ``out/NAME.md`` (``text``); returns both paths.

    ``indent`` and ``allow_nan`` are ``json.dumps``'s (the comparison scripts keep their one-space
    indent and may record a NaN).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = out / f"{name}.json", out / f"{name}.md"
    paths[0].write_text(json.dumps(report, indent=indent, allow_nan=allow_nan) + "\n")
    paths[1].write_text(text if text.endswith("\n") else text + "\n")
    return paths
