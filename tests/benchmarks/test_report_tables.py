"""benchmarks.report_tables: the one table helper against a hand-written table, and the timing table."""

import dataclasses

from benchmarks.report_tables import (
    EVALUATIONS_MEAN,
    FINAL_LOSS,
    label_column,
    median_column,
    seeds_column,
    table,
    timing_table,
    wins_column,
)
from benchmarks.runs import Run


def _run(method: str, seed: int, final: float, evals: int = 10, experiment: str = "comparison", **extra) -> Run:
    return Run(experiment, method, seed, None, [0, evals], [1.0, final], final, evals, 2.0, extra=extra)


def test_table_against_a_hand_written_table():
    groups = {
        "A": [_run("A", 0, 0.1), _run("A", 1, 0.3, evals=20)],
        "B": [_run("B", 0, 0.2), _run("B", 1, 0.2)],
        "empty": [],
    }
    columns = [
        label_column(),
        EVALUATIONS_MEAN,
        FINAL_LOSS,
        median_column(),
        wins_column("seeds where A is lower", {0: 0.1, 1: 0.3}, "A", lower=True),
        seeds_column(),
    ]
    expected = "\n".join(
        [
            "| method | evaluations (mean) | final validation loss (mean ± s.e.) | median | seeds where A is lower "
            "| seeds |",
            "|---|---|---|---|---|---|",
            "| A | 15 | 0.2 ± 0.1 | 0.2 | — | 2 |",
            "| B | 10 | 0.2 ± 0 | 0.2 | 1/2 | 2 |",
            "| (reference) | | 0 | x |",
        ]
    )
    assert table(groups, columns, [["(reference)", "", 0, "x"]]) == expected


def test_timing_table_counts_reused_runs_as_free():
    runs = [_run("A", 0, 0.1), _run("A", 1, 0.1), dataclasses.replace(_run("C", 0, 0.1), extra={"reused": True})]
    assert timing_table(runs).splitlines()[2:] == [
        "| comparison | A | 2 | 4.0 | 2.0 |",
        "| comparison | C | 1 (reused) | 0 | — |",
    ]
