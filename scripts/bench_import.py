#!/usr/bin/env python
r"""Import time of ``botorch_dp`` against ``botorch``'s, side by side (issue 33, item 4).

Each statement runs in a fresh interpreter (``python -c``); the child times the import itself
with ``time.perf_counter`` (interpreter start-up is not counted; the whole process's wall time
is reported next to it) and reports how many modules it loaded and where ``botorch_dp`` came
from. Every statement runs once as a warm-up (bytecode caches), then ``--repeats`` times in
alternating order (forwards, backwards, ...), so that a slow spell of the machine hits every
statement alike; the medians are compared.

The statements:

- ``import botorch`` (the reference of the issue's goal: ``import botorch_dp`` at most 1.3x);
- ``import botorch_dp``;
- ``from botorch_dp import *``: every public name of the package loaded (what a user who
  touches ``DPGIBO``, ``qGradientInformation``, ``plan_private_run``... pays once);
- ``from botorch.acquisition import AcquisitionFunction``: what any BoTorch acquisition
  function (``qGradientInformation`` included) costs, for reference;
- with ``--compare REF``: the first two ``botorch_dp`` statements again on the package as it
  is at the git revision ``REF`` (``git archive`` into a temporary directory), in the same run.

The children import ``botorch_dp`` from this checkout (its root is put first on
``PYTHONPATH``), whatever is installed.

Usage::

    python scripts/bench_import.py                     # 7 repeats, writes reports/bench_import.{json,md}
    python scripts/bench_import.py --compare 84f31a0   # + the package at that revision
    python scripts/bench_import.py --quick --out /tmp  # one repeat, no warm-up, no reference row
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.3

#: The child: time the statement, then report what it loaded.
_CHILD = """
import sys, time, json
_t0 = time.perf_counter()
{statement}
_dt = time.perf_counter() - _t0
_m = sys.modules.get("botorch_dp")
print(json.dumps({{"import_s": _dt, "modules": len(sys.modules), "botorch_dp_file": getattr(_m, "__file__", None)}}))
"""

_INFO = """
import json, os, sys, torch, botorch, gpytorch, scipy
print(json.dumps({"python": sys.version.split()[0], "torch": torch.__version__, "botorch": botorch.__version__,
                  "gpytorch": gpytorch.__version__, "scipy": scipy.__version__,
                  "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
                  "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}))
"""


@dataclass
class Target:
    name: str
    statement: str
    root: Path | None = None  # where botorch_dp is imported from (None: not checked)
    import_s: list[float] = field(default_factory=list)
    process_s: list[float] = field(default_factory=list)
    modules: int = 0

    def summary(self) -> dict:
        return {
            "name": self.name,
            "statement": self.statement,
            "botorch_dp_root": None if self.root is None else str(self.root),
            "median_s": statistics.median(self.import_s),
            "min_s": min(self.import_s),
            "max_s": max(self.import_s),
            "median_process_s": statistics.median(self.process_s),
            "modules": self.modules,
            "import_s": self.import_s,
            "process_s": self.process_s,
        }


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_child(target: Target) -> tuple[float, float, int]:
    r"""One fresh interpreter: (import seconds measured inside, process wall seconds, modules loaded)."""
    root = target.root or ROOT
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(statement=target.statement)],
        check=False,
        env=_env(root),
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{target.statement!r} failed:\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if target.root is not None and not str(out["botorch_dp_file"]).startswith(str(target.root)):
        raise RuntimeError(f"{target.name}: botorch_dp came from {out['botorch_dp_file']}, not {target.root}")
    return out["import_s"], wall, out["modules"]


def measure(targets: list[Target], repeats: int, warm_up: bool = True, log=print) -> None:
    for target in targets if warm_up else []:  # bytecode caches, page cache
        run_child(target)
    for r in range(repeats):
        for target in targets if r % 2 == 0 else targets[::-1]:
            import_s, wall, modules = run_child(target)
            target.import_s.append(import_s)
            target.process_s.append(wall)
            target.modules = modules
        log(f"repeat {r + 1}/{repeats}: " + ", ".join(f"{t.name} {t.import_s[-1]:.3f} s" for t in targets))


def _export(ref: str, into: Path) -> str:
    r"""``botorch_dp/`` as it is at the git revision ``ref``, unpacked under ``into``; the full hash."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = into / "botorch_dp.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), commit, "botorch_dp"], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return commit


def _git_head() -> str | None:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "botorch_dp"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + (" (botorch_dp/ modified)" if dirty.stdout.strip() else "")


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def versions() -> dict:
    done = subprocess.run([sys.executable, "-c", _INFO], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def targets_for(compare_root: Path | None, compare_ref: str | None, reference: bool) -> list[Target]:
    targets = [
        Target("botorch", "import botorch"),
        Target("botorch_dp", "import botorch_dp", ROOT),
        Target("botorch_dp public names", "from botorch_dp import *", ROOT),
    ]
    if reference:
        targets.append(Target("botorch AcquisitionFunction", "from botorch.acquisition import AcquisitionFunction"))
    if compare_root is not None:
        targets += [
            Target(f"botorch_dp @ {compare_ref}", "import botorch_dp", compare_root),
            Target(f"botorch_dp public names @ {compare_ref}", "from botorch_dp import *", compare_root),
        ]
    return targets


def ratios(summaries: list[dict]) -> dict:
    base = next(s["median_s"] for s in summaries if s["name"] == "botorch")
    return {s["name"]: s["median_s"] / base for s in summaries if s["name"] != "botorch"}


def render(report: dict) -> str:
    lines = [
        "# Import time: `botorch_dp` against `botorch` (issue 33, item 4)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Date: {report['date']}; measured tree: `{report['git_head']}`",
        "",
        "Machine: {platform}, {cpu_count} CPUs ({cpus_usable} usable), load average {load}".format(
            load=" / ".join(f"{x:.2f}" for x in report["machine"]["load_average"] or []), **report["machine"]
        ),
        "(at the start; at the end {}).".format(" / ".join(f"{x:.2f}" for x in report["load_average_end"] or [])),
        "",
        "Python {python}, torch {torch} ({torch_threads} threads, OMP_NUM_THREADS={OMP_NUM_THREADS}), "
        "botorch {botorch}, "
        "gpytorch {gpytorch}, scipy {scipy}.".format(**report["versions"]),
        "",
        (
            f"Each statement in a fresh `python -c`, timed inside the child with `time.perf_counter` around the "
            f"statement; {'one warm-up each, then ' if report['warm_up'] else 'no warm-up, '}{report['repeats']} "
            f"repeat(s) in alternating order; medians."
        ),
        "",
        "| statement | median (s) | min (s) | max (s) | process wall, median (s) | modules loaded "
        "| × `import botorch` |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in report["targets"]:
        ratio = report["ratios"].get(s["name"], 1.0)
        label = f"`{s['statement']}`" + (f" ({s['name'].split('@')[1].strip()})" if "@" in s["name"] else "")
        lines.append(
            f"| {label} | {s['median_s']:.3f} | {s['min_s']:.3f} | {s['max_s']:.3f} | "
            f"{s['median_process_s']:.3f} | {s['modules']} | {ratio:.2f} |"
        )
    verdict = "met" if report["meets_goal"] else "NOT met"
    lines += ["", f"`import botorch_dp` / `import botorch` = **{report['ratio']:.3f}** (goal ≤ {GOAL}: {verdict})."]
    rel = report["ratios"]
    lines += [
        "",
        (
            f"`from botorch_dp import *` / `import botorch` = {rel['botorch_dp public names']:.2f}: every public "
            "name loaded (the package imports them on first access, so this is what a user of `DPGIBO` or "
            "`qGradientInformation` pays once)."
        ),
    ]
    if "botorch AcquisitionFunction" in rel:
        lines += [
            "",
            (
                f"`from botorch.acquisition import AcquisitionFunction` / `import botorch` = "
                f"{rel['botorch AcquisitionFunction']:.2f}: the floor of any BoTorch acquisition function, "
                "`qGradientInformation` included."
            ),
        ]
    if report["compare"]:
        ref = report["compare"]["ref"]
        lines += [
            "",
            (
                f"Before, at `{ref}` (`{report['compare']['commit'][:12]}`), same run: `import botorch_dp` / "
                f"`import botorch` = {rel[f'botorch_dp @ {ref}']:.2f}, `from botorch_dp import *` / "
                f"`import botorch` = {rel[f'botorch_dp public names @ {ref}']:.2f}."
            ),
        ]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=None, help="timed runs per statement (default 7, --quick 1)")
    p.add_argument("--quick", action="store_true", help="one repeat, no warm-up, no reference row (a smoke test)")
    p.add_argument("--compare", metavar="REF", default=None, help="also time botorch_dp as it is at this git revision")
    p.add_argument("--out", type=Path, default=ROOT / "reports", help="directory of bench_import.json/.md")
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 7
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    return args


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    started = machine()
    with tempfile.TemporaryDirectory(prefix="bench_import_") as tmp:
        compare_root = compare_commit = None
        if args.compare:
            compare_root = Path(tmp)
            compare_commit = _export(args.compare, compare_root)
        targets = targets_for(compare_root, args.compare, reference=not args.quick)
        measure(targets, args.repeats, warm_up=not args.quick)
    summaries = [t.summary() for t in targets]
    rel = ratios(summaries)
    report = {
        "command": shlex.join(["python", "scripts/bench_import.py", *argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_head": _git_head(),
        "compare": None if not args.compare else {"ref": args.compare, "commit": compare_commit},
        "machine": started,
        "load_average_end": machine()["load_average"],
        "versions": versions(),
        "repeats": args.repeats,
        "warm_up": not args.quick,
        "goal": GOAL,
        "targets": summaries,
        "ratios": rel,
        "ratio": rel["botorch_dp"],
        "meets_goal": rel["botorch_dp"] <= GOAL,
    }
    text = render(report)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_import.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "bench_import.md").write_text(text)
    return report


if __name__ == "__main__":
    main()
