"""The slow marker (issue 31, item 4): ``make test-fast`` (``-m "not slow"``) leaves out the Dask,
PostgreSQL, notebook, subprocess and other long tests, and tests/slow_tests.txt names only tests
that exist."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SLOW_PATHS, slow_functions

ROOT = Path(__file__).resolve().parents[1]


def _collected(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_the_fast_set_leaves_out_the_slow_tests_and_the_list_names_existing_tests():
    everything = _collected()
    fast = _collected("-m", "not slow")
    # the fast versions of the privacy properties (issue 40 item 6) are all in the fast set, also where
    # they sit in a slow path (tests/audit/test_training_selection.py: the audit row's fast version)
    privacy_fast = _collected("-m", "privacy_fast")
    assert len(privacy_fast) >= 20 and set(privacy_fast) <= set(fast)
    functions = {node.split("[")[0] for node in everything}
    assert slow_functions() <= functions, sorted(slow_functions() - functions)
    slow = [node for node in fast if node.startswith(SLOW_PATHS) or node.split("[")[0] in slow_functions()]
    assert set(slow) <= set(privacy_fast), sorted(set(slow) - set(privacy_fast))
    assert not [node for node in fast if "postgresql" in node or "dask" in node.lower()]
    assert 0.6 * len(everything) < len(fast) < len(everything)  # most tests are fast; some are not
