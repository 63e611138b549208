"""scripts/compare_noise_schedules.py: quick mode runs both schedules on common seeds and the table is consistent."""

import json

from tests.helpers import loaded_script


def test_quick_json_rows(capsys):
    with loaded_script("compare_noise_schedules") as script:
        assert script.main(["--quick", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["problem"], r["schedule"]) for r in rows] == [
        ("huber_e4", "fixed"),
        ("huber_e4", "adaptive_norm"),
        ("normal_location_d5", "fixed"),
        ("normal_location_d5", "adaptive_norm"),
    ]
    for fixed, adaptive in (rows[0:2], rows[2:4]):
        assert fixed["mean_steps"] == fixed["T_max"] and 1 <= adaptive["mean_steps"] <= adaptive["T_max"]
        assert all(x >= -1e-12 for x in fixed["excess_losses"] + adaptive["excess_losses"])  # f(θ) ≥ f(θ*)
        wins = sum(a < f for a, f in zip(adaptive["excess_losses"], fixed["excess_losses"], strict=True))
        assert adaptive["adaptive_wins"] == wins and len(fixed["excess_losses"]) == 2


def test_table_output(capsys):
    with loaded_script("compare_noise_schedules") as script:
        assert script.main(["--quick", "--seeds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| problem | schedule") and len(out) == 6
