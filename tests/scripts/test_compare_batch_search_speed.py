"""scripts/compare_batch_search_speed.py: both speeds run on every seed, paired; own time is the run's
wall time less the objective's; the report's table is what the runs say; --summarize merges files."""

import json

import torch

from tests.helpers import loaded_script


def test_tiny_comparison_pairs_the_speeds_and_merges(tmp_path):
    threads = torch.get_num_threads()
    with loaded_script("compare_batch_search_speed") as script:
        try:
            script.main(["--dims", "2", "--seeds", "0", "1", "--iterations", "2", "--threads", "1",
                         "--out", str(tmp_path / "a")])
        finally:
            torch.set_num_threads(threads)  # the script sets the process's thread count
        data = json.loads((tmp_path / "a.json").read_text())
        runs = data["runs"]
        assert [(r["seed"], r["arm"]) for r in runs] == [(0, "reference"), (0, "fast"), (1, "fast"), (1, "reference")]
        for r in runs:
            assert (
                abs(r["own"] - (r["total"] - r["objective"])) < 1e-9
                and abs(r["ratio"] - r["own"] / r["objective"]) < 1e-9
            )
            assert r["acquisition_evaluations"] > 0 and r["final_loss"] > 0
        table = (tmp_path / "a.md").read_text()
        mean = ((runs[1]["final_loss"] - runs[0]["final_loss"]) + (runs[2]["final_loss"] - runs[3]["final_loss"])) / 2
        assert "| 2 | 2 |" in table and f"| {mean:+.5f} ± " in table and "--threads 1" in table
        script.main(["--summarize", str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--out", str(tmp_path / "b")])
    merged = json.loads((tmp_path / "b.json").read_text())
    assert len(merged["parts"]) == 2 and [r["seed"] for p in merged["parts"] for r in p["runs"]] == [0, 0, 1, 1] * 2
