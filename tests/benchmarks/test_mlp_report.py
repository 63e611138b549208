"""benchmarks.mlp_report on the quick run: one row per (μ, method) in the main table,
one paired comparison per (μ, other method) whose numbers are those of the per-seed runs, and a plot."""

import pytest

from benchmarks import mlp_report
from benchmarks.mlp_task import DP_GIBO, DP_HYPO, GIBO, PRIVATE_METHODS, PRIVATE_RS, REFERENCE_METHODS


@pytest.fixture
def quick(mlp_quick):
    return mlp_quick


def _rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("|")
    ]


def test_report_has_one_row_per_mu_and_method_and_a_plot(quick):
    s, path = quick["settings"], quick["path"]
    text = path.read_text()
    assert path.name == mlp_report.REPORT_MD and (path.parent / mlp_report.REPORT_PNG).stat().st_size > 0
    main, paired = text.split("## Paired by seed")
    keys = [(r[0], r[2]) for r in _rows(main)[2:]]
    expected = [(f"{mu:g}", m) for mu in s.mus for m in PRIVATE_METHODS] + [("∞", m) for m in REFERENCE_METHODS]
    assert keys == expected
    pairs = _rows(paired)[2:]
    assert [(r[0], r[1]) for r in pairs] == [(f"{mu:g}", m) for mu in s.mus for m in (PRIVATE_RS, DP_HYPO, GIBO)]
    # the paired difference of validation losses is the difference of the per-seed runs
    runs = quick["runs"]
    first = pairs[0]
    diffs = [
        next(r for r in runs if r.method == PRIVATE_RS and r.setting == s.mus[0] and r.seed == seed).final_loss
        - next(r for r in runs if r.method == DP_GIBO and r.setting == s.mus[0] and r.seed == seed).final_loss
        for seed in s.seeds
    ]
    assert float(first[2].split(" ± ")[0]) == pytest.approx(sum(diffs) / len(diffs), abs=1e-4)
    assert int(first[3].split(" / ")[0]) == sum(d > 0 for d in diffs)
    assert "python -m benchmarks run mlp --quick" in text and "NON-PRIVATE" in text
