"""benchmarks.dpsgd (issue 41, item 5): the jobs' order, the paired statistics and the goal's verdict
computed from hand-made runs (no training), a registered arm running through the runner, and one
quick run of every arm through the CLI's ``run_experiment`` that resumes from its store (slow)."""

import dataclasses
import json
import math
import pickle
from pathlib import Path

import pytest

from benchmarks import dpsgd, dpsgd_arms
from benchmarks.cli import run_experiment
from benchmarks.dpsgd_report import ANCHOR, GOAL, paired, summary
from benchmarks.dpsgd_task import DEFAULTS, Settings, quick_settings
from benchmarks.experiment import REQUIRED_MEMBERS, load_experiment
from benchmarks.runs import Run

BEST = "default lr 0.3, momentum 0"


def test_the_module_satisfies_the_contract_and_refuses_an_unknown_arm():
    assert load_experiment("dpsgd") is dpsgd and all(hasattr(dpsgd, m) for m in REQUIRED_MEMBERS)
    s = Settings()
    json.dumps(dataclasses.asdict(s))
    json.dumps(dpsgd.prepare(s))
    assert set(s.arms) <= set(dpsgd_arms.ARMS) and set(DEFAULTS) <= set(s.arms) and ANCHOR in s.arms
    assert pickle.loads(pickle.dumps(dpsgd.make_runner(s, {}))).__self__.settings == s
    with pytest.raises(ValueError, match="unknown arm.*'nope'"):
        dpsgd.prepare(dataclasses.replace(s, arms=("nope",)))


def test_the_goal_cells_come_first_and_the_reference_runs_once_per_seed():
    s = Settings()
    jobs = dpsgd.experiment_jobs(s, {})
    per_epsilon = [a for a in s.arms if dpsgd_arms.ARMS[a].kind != "reference"]
    assert len(jobs) == len(s.epsilons) * len(s.datasets) * len(s.seeds) * len(per_epsilon) + len(s.datasets) * len(
        s.seeds
    )
    keys = [(j.kwargs["dataset"], j.kwargs["epsilon"], j.kwargs["seed"], j.kwargs["arm"]) for j in jobs]
    assert len(set(keys)) == len(keys)
    first = len(s.datasets) * len(s.seeds) * len(per_epsilon)
    assert s.epsilons[0] == 3.0 and all(j.kwargs["epsilon"] == 3.0 for j in jobs[:first])
    assert all(j.kwargs["epsilon"] is None for j in jobs[first : first + len(s.datasets) * len(s.seeds)])
    assert all(not j.deps for j in jobs) and len({j.cost for j in jobs}) == 1  # equal costs keep the order


def test_paired_counts_wins_ties_and_the_mean_difference_on_common_seeds():
    a = {0: 0.9, 1: 0.8, 2: 0.7, 3: 0.5}
    b = {0: 0.8, 1: 0.8, 2: 0.75, 9: 0.1}
    p = paired(a, b)
    assert (p["wins"], p["ties"], p["losses"], p["pairs"]) == (1, 1, 1, 3)
    diffs = [0.1, 0.0, -0.05]
    mean = sum(diffs) / 3
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2 / 3)
    assert p["mean_difference"] == pytest.approx(mean) and p["se"] == pytest.approx(se)


def _runs(accuracies: dict[str, list[float]], dataset: str = "digits", epsilon: float = 3.0) -> list[Run]:
    return [
        Run(
            "dpsgd",
            arm,
            seed,
            dpsgd.setting_of(dataset, epsilon),
            [1],
            [0.0],
            0.0,
            1.0,
            0.0,
            epsilon=epsilon,
            extra={"dataset": dataset, "target_epsilon": epsilon, "test_accuracy": acc, "sigma": 1.0, "trainings": 1},
        )
        for arm, values in accuracies.items()
        for seed, acc in enumerate(values)
    ]


def _goal(winner: list[float]) -> dict:
    s = dataclasses.replace(
        Settings(), datasets=("digits",), epsilons=(3.0,), arms=(*DEFAULTS, ANCHOR, "proxy then train")
    )
    base = [0.80] * 10
    runs = _runs(
        {
            "default lr 0.1, momentum 0.9": [0.70] * 10,
            "default lr 0.1, momentum 0": [0.75] * 10,
            BEST: [0.85] * 10,
            ANCHOR: base,
            "proxy then train": winner,
        }
    )
    return summary(s, dpsgd.prepare(s), runs)


def test_the_goal_needs_eight_anchor_wins_a_better_mean_and_six_default_wins():
    met = [0.90] * 6 + [0.84] * 2 + [0.79] * 2  # 8 wins over the anchor, 6 over the best default, mean 0.866
    data = _goal(met)
    assert data["cells"]["digits ε=3"]["best_default"] == BEST
    verdict = data["goal"]["digits"]
    assert verdict["best"] == "proxy then train" and verdict["met"], verdict
    assert not data["missing"]
    assert not _goal([0.90] * 6 + [0.84] * 1 + [0.79] * 3)["goal"]["digits"]["met"]  # 7 anchor wins
    assert not _goal([0.90] * 5 + [0.84] * 3 + [0.79] * 2)["goal"]["digits"]["met"]  # 5 default wins
    assert not _goal([0.86] * 6 + [0.81] * 4)["goal"]["digits"]["met"]  # 10 and 6 wins, mean 0.84 < 0.85
    partial = _goal(met[:4])
    assert "digits ε=3: proxy then train (4 of 10 seeds)" in partial["missing"]


def test_an_arm_added_to_the_registry_runs_through_the_runner_and_reaches_the_report(monkeypatch, tmp_path):
    def constant(settings, dataset, seed, epsilon):
        return {
            "test_accuracy": 0.5 + seed / 100,
            "test_loss": 1.0,
            "sigma": 2.0,
            "trainings": 3,
            "ledger_epsilon": epsilon,
            "hyperparameters": {"lr": 0.1, "momentum": 0.0},
        }

    monkeypatch.setitem(dpsgd_arms.ARMS, "constant", dpsgd_arms.Arm("private", "a fixed answer", constant))
    s = dataclasses.replace(quick_settings(), seeds=(0, 1), arms=("constant",))
    context = dpsgd.prepare(s)
    runs = [dpsgd.make_runner(s, context)(j.kind, j.kwargs) for j in dpsgd.experiment_jobs(s, context)]
    assert [(r.method, r.seed, r.extra["test_accuracy"], r.epsilon) for r in runs] == [
        ("constant", 0, 0.5, 3.0),
        ("constant", 1, 0.51, 3.0),
    ]
    text = dpsgd.write_report(s, {**context, "execution": "test", "wall_s": 0.0}, runs, tmp_path, "cmd").read_text()
    assert "| constant | 0.505 ± 0.005 | 2 |" in text
    assert text.index(GOAL[1:]) < text.index("## Results")


@pytest.mark.slow  # every arm once, quick settings (about 20 s of CPU; listed in tests/slow_tests.txt)
def test_a_quick_run_of_every_arm_holds_its_epsilon_and_resumes_from_the_store(tmp_path):
    s = quick_settings()
    first = run_experiment("dpsgd", s, tmp_path, progress=False, command="python -m benchmarks run dpsgd --quick")
    runs = first["runs"]
    assert {r.method for r in runs} == set(s.arms) and first["ran"] == len(runs) == len(s.arms)
    for r in runs:
        if r.extra.get("realized_trainings") == 0:  # a Poisson K of 0 releases no model: no accuracy
            assert math.isnan(r.extra["test_accuracy"])
        else:
            assert 0.0 <= r.extra["test_accuracy"] <= 1.0
        if dpsgd_arms.ARMS[r.method].kind == "reference":
            assert r.epsilon is None
        else:  # every private arm and default spends the target on the training records, within tolerance
            assert 2.9 <= r.epsilon <= 3.0 + 1e-9, (r.method, r.epsilon)
    text = (tmp_path / "dpsgd.md").read_text()
    assert text.index("## Goal") < text.index("## Was the goal met?") < text.index("## Results")
    assert json.loads((tmp_path / "dpsgd.json").read_text())["cells"]["digits ε=3"]["rows"]
    again = run_experiment("dpsgd", s, tmp_path, progress=False)
    assert again["ran"] == 0 and again["stored"] == len(runs)


def test_the_documented_defaults_are_the_benchmarks():
    page = (Path(__file__).parents[2] / "docs" / "how-to" / "tune-dp-sgd.md").read_text()
    table = page[page.index("## Untuned defaults") : page.index("## Measured")]
    documented = set()
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[2].replace(".", "", 1).isdigit():
            documented.add((float(cells[2]), float(cells[3])))
    assert documented == {(p["lr"], p["momentum"]) for p in DEFAULTS.values()}
