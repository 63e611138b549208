r"""Rewrite ``tests/slow_tests.txt`` from a ``pytest --durations=0`` log.

``make test-fast`` runs ``pytest -m "not slow"``; ``tests/conftest.py`` marks ``slow`` every test
under ``SLOW_PATHS`` (audits, notebooks, scripts, Dask, subprocesses), every test using a
fixture of ``SLOW_FIXTURES`` (PostgreSQL, a Dask cluster), and every test function listed in
``tests/slow_tests.txt``: the functions whose calls and set-ups took at least ``--threshold``
seconds together (all parameters) in the log, except the tests marked ``privacy_fast`` (the fast
versions of privacy properties, which stay in the fast set whatever they take). Re-run when the
fast set grows past 90 s::

    python -m pytest -q -p no:cacheprovider --durations=0 --durations-min=0.05 > /tmp/durations.log
    python scripts/update_slow_tests.py /tmp/durations.log
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import SLOW_PATHS  # noqa: E402

LINE = re.compile(r"^(?P<seconds>[0-9.]+)s (?:call|setup|teardown)\s+(?P<node>\S+)")


def privacy_fast_functions() -> frozenset[str]:
    r"""The ``file::function`` ids of the tests marked ``privacy_fast`` (collected by pytest)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "privacy_fast"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return frozenset(line.split("[")[0] for line in done.stdout.splitlines() if "::" in line)


def slow_functions(log: str, threshold: float, keep_fast: frozenset[str] = frozenset()) -> dict[str, float]:
    r"""``{file::function: seconds}`` of the functions at or above ``threshold`` outside ``SLOW_PATHS``
    and ``keep_fast``."""
    totals: dict[str, float] = collections.defaultdict(float)
    for line in log.splitlines():
        match = LINE.match(line.strip())
        if match and not match.group("node").startswith(SLOW_PATHS):
            totals[match.group("node").split("[")[0]] += float(match.group("seconds"))
    return {node: seconds for node, seconds in sorted(totals.items()) if seconds >= threshold and node not in keep_fast}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="output of pytest --durations=0")
    parser.add_argument("--threshold", type=float, default=0.3, help="seconds per test function (default 0.3)")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "slow_tests.txt")
    args = parser.parse_args(argv)
    found = slow_functions(args.log.read_text(), args.threshold, privacy_fast_functions())
    header = [
        "# Test functions marked slow (tests/conftest.py), besides SLOW_PATHS and SLOW_FIXTURES: each took",
        f"# at least {args.threshold:g} s (all its parameters together) in a --durations=0 run on 2 cores",
        "# (tests marked privacy_fast are never listed).",
        "# Written by scripts/update_slow_tests.py; the seconds are that run's.",
    ]
    args.out.write_text("\n".join(header + [f"{node}  # {seconds:.1f} s" for node, seconds in found.items()]) + "\n")
    print(f"{len(found)} functions, {sum(found.values()):.1f} s, written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
