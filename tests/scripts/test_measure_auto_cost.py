"""scripts/measure_auto_cost.py: the logistic task's losses are the closed form, and the report marks a
row as meeting the 2x target exactly when the whole call took at most twice the private run."""

import math

import pytest
import torch

from tests.helpers import loaded_script


@pytest.fixture(scope="module")
def script():
    with loaded_script("measure_auto_cost") as module:
        yield module


def test_the_logistic_task_is_per_user_softplus_of_the_margin(script):
    objective, space, proxy, n = script.logistic_task(0, d=3, n=50, n_p=20)
    assert n == 50 and space.names == ["w0", "w1", "w2"]
    config = {"w0": 0.5, "w1": -1.0, "w2": 2.0}
    losses = objective([config, {"w0": 0.0, "w1": 0.0, "w2": 0.0}])
    assert losses.shape == (2, 50) and proxy([config]).shape == (1, 20)
    torch.testing.assert_close(losses[1], torch.full((50,), math.log(2.0), dtype=torch.float64))  # w = 0
    assert (losses[0] > 0).all()


def test_the_report_marks_the_target_and_says_the_command(script, tmp_path, monkeypatch):
    monkeypatch.setattr(script, "REPORT", tmp_path)
    row = dict(task="wine", seed=0, plan_budget="auto", method="dp_gibo", planning="cut", proxy_points_asked=9)
    rows = [
        {**row, "total_s": 4.0, "planning_s": 2.0, "private_s": 2.0, "ratio": 2.0, "proxy_points_evaluated": 8},
        {**row, "total_s": 4.2, "planning_s": 2.2, "private_s": 2.0, "ratio": 2.1, "proxy_points_evaluated": 8},
    ]
    script.write(rows, "--seeds 1")
    text = (tmp_path / "auto-cost.md").read_text()
    assert "| 2.00x | yes |" in text and "| 2.10x | no |" in text
    assert "scripts/measure_auto_cost.py --seeds 1" in text and "at most 2x" in text
    assert (tmp_path / "auto-cost.json").is_file()
