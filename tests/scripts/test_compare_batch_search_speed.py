"""scripts/compare_batch_search_speed.py: the arms (speeds) run on every seed, paired; own time is the run's
wall time less the objective's; the report's table is what the runs say; --summarize merges files."""

import json

import pytest
import torch

from tests.helpers import loaded_script


def test_tiny_comparison_pairs_the_speeds_and_merges(tmp_path):
    threads = torch.get_num_threads()
    with loaded_script("compare_batch_search_speed") as script:
        try:
            script.main(
                [
                    "--dims",
                    "2",
                    "--seeds",
                    "0",
                    "1",
                    "--iterations",
                    "2",
                    "--threads",
                    "1",
                    "--out",
                    str(tmp_path / "a"),
                ]
            )
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
        assert "| 2 | fast | 2 |" in table and f"| {mean:+.5f} ± " in table and "--threads 1" in table
        script.main(["--summarize", str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--out", str(tmp_path / "b")])
    merged = json.loads((tmp_path / "b.json").read_text())
    assert len(merged["parts"]) == 2 and [r["seed"] for p in merged["parts"] for r in p["runs"]] == [0, 0, 1, 1] * 2


def test_arms_set_the_speed_and_lift_the_warm_cap_only_for_fast_uncapped(tmp_path, monkeypatch):
    import botorch_dp.optim.options.batches as batches

    threads, seen = torch.get_num_threads(), []
    with loaded_script("compare_batch_search_speed") as script:
        real = script._profiler()

        class Recording:
            @staticmethod
            def profile_run(*args, **kwargs):
                seen.append((kwargs["acqf_speed"], batches.WARM_MAXITER))
                return real.profile_run(*args, **kwargs)

        monkeypatch.setattr(script, "_profiler", lambda: Recording)
        try:
            script.main(
                [
                    "--arms",
                    "fast-uncapped",
                    "reference",
                    "fast",
                    "--dims",
                    "2",
                    "--seeds",
                    "0",
                    "1",
                    "--iterations",
                    "2",
                    "--threads",
                    "1",
                    "--out",
                    str(tmp_path / "a"),
                ]
            )
        finally:
            torch.set_num_threads(threads)
        cap = batches.WARM_MAXITER
        assert cap is not None  # restored after every run
        assert seen == [
            ("fast", None),
            ("reference", cap),
            ("fast", cap),
            ("fast", cap),
            ("reference", cap),
            ("fast", None),
        ]
        data = json.loads((tmp_path / "a.json").read_text())
        assert data["arms"] == ["fast-uncapped", "reference", "fast"] and data["warm_maxiter"] == cap
        table = (tmp_path / "a.md").read_text()
        by = {(r["seed"], r["arm"]): r["final_loss"] for r in data["runs"]}
        for arm in ("reference", "fast"):  # one row per arm against the baseline, its mean paired difference
            mean = sum(by[s, arm] - by[s, "fast-uncapped"] for s in (0, 1)) / 2
            assert f"| 2 | {arm} | 2 |" in table and f"| {mean:+.5f} ± " in table
        assert "| 2 | fast-uncapped |" not in table
        with pytest.raises(SystemExit):
            script.main(["--arms", "fast", "fast", "--out", str(tmp_path / "b")])
