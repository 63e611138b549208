"""scripts/acqf_maxiter_check.py: each run gets its cap, pairs share everything else, and the
table's paired statistics are those of the runs (recomputed by hand)."""

import json
import re

import pytest

from tests.helpers import loaded_script


def test_quick_run_pairs_the_caps_and_reports_them(monkeypatch, capsys, tmp_path):
    with loaded_script("acqf_maxiter_check") as script:
        seen = []
        original = script.dimension.DPGIBO

        def spy(config):
            seen.append(config.acqf_maxiter)
            return original(config)

        monkeypatch.setattr(script.dimension, "DPGIBO", spy)
        out_json = tmp_path / "runs.json"
        rows = script.main(
            ["--dims", "3", "--seeds", "0", "1", "--caps", "none", "2", "--quick", "--json", str(out_json)]
        )
    out = capsys.readouterr().out
    assert seen[0] == 5  # the warm-up run (quick settings' cap), not timed
    assert sorted(seen[1:], key=str) == [2, 2, None, None]
    assert [(r["seed"], r["cap"]) for r in rows] == [(0, "2"), (0, "none"), (1, "2"), (1, "none")]
    for seed in (0, 1):  # a pair differs only in the search: same budget
        a, b = (r for r in rows if r["seed"] == seed)
        assert a["num_evaluations"] == b["num_evaluations"] > 0
    saved = json.loads(out_json.read_text())  # every finished run, in the order they ended
    assert sorted(saved, key=lambda r: (r["seed"], r["cap"])) == rows
    no_worse = sum(
        r2["final_loss"] <= r1["final_loss"]
        for r1 in rows
        if r1["cap"] == "none"
        for r2 in rows
        if r2["cap"] == "2" and r2["seed"] == r1["seed"]
    )
    assert re.search(rf"^\| 3 \| 2 \| .* \| {no_worse}/2 \|$", out, re.M), out


def test_summary_statistics_by_hand(tmp_path, capsys):
    rows = [
        {"dim": 7, "seed": s, "cap": c, "final_loss": v, "wall_s": w}
        for s, c, v, w in [
            (0, "none", 1.0, 10.0),
            (1, "none", 2.0, 30.0),
            (2, "none", 3.0, 20.0),
            (0, "10", 1.5, 1.0),
            (1, "10", 2.0, 3.0),
            (2, "10", 2.5, 2.0),
            (3, "10", 9.0, 2.0),
        ]
    ]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(rows))
    with loaded_script("acqf_maxiter_check") as script:
        script.main(["--summarize", str(path), "--caps", "none", "10"])
    out = capsys.readouterr().out
    # seed 3 has no uncapped run: left out of the table, listed as unfinished
    # differences +0.5, 0, −0.5: mean 0, s.e. 0.5/√3 = 0.29, median 0; no worse on 2 of 3; median walls 20 and 2
    assert "| 7 | 3 | 2 ± 0.58 | 2 ± 0.29 | 20 | 2 | +0 ± 0.29 (+0) | 2/3 |" in out, out
    assert "3: unfinished / 9" in out


def test_caps_are_checked():
    with loaded_script("acqf_maxiter_check") as script:
        assert script.parse_cap("NONE") is None and script.parse_cap("100") == 100
        with pytest.raises(Exception, match="cap must be"):
            script.parse_cap("0")
        with pytest.raises(SystemExit):
            script.main(["--caps", "100", "100"])
