"""benchmarks.mixed_report: every cell recomputed from the stored runs (the run store read back
line by line), the paired wins by brute force, and the pre-stated goal's verdict on synthetic
runs on both sides of its threshold."""

import dataclasses
import json
import math
import statistics

import pytest

from benchmarks import mixed_report as mr
from benchmarks import mixed_task as mt
from benchmarks.runs import Run


def _stored_runs(out):
    lines = (out / "runs-mixed.jsonl").read_text().splitlines()[1:]
    return [Run(**json.loads(line)["run"]) for line in lines]


@pytest.mark.slow
def test_report_cells_are_recomputed_from_the_stored_runs(mixed_quick):
    s, out = mixed_quick["settings"], mixed_quick["out"]
    stored = _stored_runs(out)
    assert len(stored) == len(mixed_quick["jobs"])
    data = json.loads((out / mr.REPORT_JSON).read_text())
    md = (out / mr.REPORT_MD).read_text()
    for method in mt.METHODS:
        for key, cell in data["cells"][method].items():
            values = [
                r.extra["test_loss"]
                for r in stored
                if r.method == method and (r.epsilon is None if key == "inf" else f"{float(r.setting):g}" == key)
            ]
            assert len(values) == len(s.seeds) and cell["seeds"] == sorted(s.seeds)
            assert cell["mean"] == pytest.approx(statistics.fmean(values), rel=1e-12)
            assert cell["se"] == pytest.approx(statistics.stdev(values) / math.sqrt(len(values)), rel=1e-12)
            assert f"{cell['mean']:.4f} ± {cell['se']:.4f} ({len(values)})" in md
    for e in s.epsilons:
        key = f"{e:g}"
        tune = {r.seed: r.extra["test_loss"] for r in stored if r.method == mt.TUNE and r.setting == e}
        prs = {r.seed: r.extra["test_loss"] for r in stored if r.method == mt.PRIVATE_RS and r.setting == e}
        wins = sum(tune[k] < prs[k] for k in tune)
        assert data["wins"][key]["wins"] == wins and data["wins"][key]["pairs"] == len(s.seeds)
        assert f"| {key} | {wins} / {len(s.seeds)} |" in md
    assert mr.GOAL in md and data["complete_seeds"] == list(s.seeds)


def _runs(tune_losses, prs_losses, eps=3.0):
    runs = []
    for seed, (a, b) in enumerate(zip(tune_losses, prs_losses, strict=True)):
        for method, loss in ((mt.TUNE, a), (mt.PRIVATE_RS, b)):
            runs.append(
                Run(
                    "mixed",
                    method,
                    seed,
                    eps,
                    [1],
                    [loss],
                    loss,
                    1.0,
                    0.0,
                    epsilon=eps,
                    extra={"test_loss": loss, "test_accuracy": 0.5},
                )
            )
    return runs


def test_the_goal_needs_a_lower_mean_and_seven_paired_wins_of_ten():
    s = mt.Settings(epsilons=(3.0,))
    seven = _runs([0.1] * 7 + [0.3] * 3, [0.2] * 10)  # 7 wins, mean 0.16 < 0.2
    assert mr.summary(s, seven)["goal"]["met"] is True
    six = _runs([0.1] * 6 + [0.3] * 4, [0.2] * 10)  # 6 wins, mean 0.18 < 0.2
    g = mr.summary(s, six)["goal"]
    assert g["met"] is False and g["wins"] == 6 and g["below"] is True
    many_but_higher = _runs([0.19] * 9 + [2.0], [0.2] * 10)  # 9 wins, mean 0.371 > 0.2
    g = mr.summary(s, many_but_higher)["goal"]
    assert g["met"] is False and g["wins"] == 9 and g["below"] is False
    partial = mr.summary(s, seven[:14])  # 7 seeds finished, 7 wins: not the 10 seeds the goal names
    assert partial["goal"]["met"] is False and partial["goal"]["pairs"] == 7
    assert partial["complete_seeds"] == []  # the other methods have no runs here


@pytest.mark.slow
def test_a_partial_store_renders_with_the_seeds_each_cell_has(mixed_quick, tmp_path):
    lines = (mixed_quick["out"] / "runs-mixed.jsonl").read_text().splitlines()
    kept = [lines[0]] + [
        line
        for line in lines[1:]
        if json.loads(line)["run"]["seed"] == 0 or json.loads(line)["run"]["method"] == mt.TUNE
    ]
    (tmp_path / "runs-mixed.jsonl").write_text("\n".join(kept) + "\n")
    md = mr.render_store(tmp_path, note="test").read_text()
    data = json.loads((tmp_path / mr.REPORT_JSON).read_text())
    assert data["complete_seeds"] == [0]
    assert data["cells"][mt.TUNE]["3"]["seeds"] == [0, 1] and data["cells"][mt.PRIVATE_RS]["3"]["seeds"] == [0]
    assert data["wins"]["3"]["pairs"] == 1 and "Seeds with every method finished: 1 of 2 (0)." in md
    command = f"Command: `python -m benchmarks run mixed --workers 2 --quick --out {tmp_path}`"
    assert command in md and "rendered from the run store" in md


def test_store_command_sets_exactly_the_changed_settings_and_parses_back(tmp_path):
    import dataclasses
    from pathlib import Path

    from benchmarks.cli import settings_with

    assert mr.store_command(mt.Settings(), Path("reports")) == mr.FULL_COMMAND
    quick = mr.store_command(mt.quick_settings(), Path("q"))
    assert quick == "python -m benchmarks run mixed --workers 2 --quick --out q"
    changed = dataclasses.replace(mt.Settings(), iterations=10, epochs=8, seeds=(3, 4))
    command = mr.store_command(changed, tmp_path / "t10")
    assert command.endswith(f"--out {tmp_path / 't10'}")
    sets = command.split(" --set ")[1:]
    sets[-1] = sets[-1].split(" --out ")[0]
    assert sorted(item.split("=")[0] for item in sets) == ["epochs", "iterations", "seeds"]
    assert settings_with(mt.Settings(), sets) == changed


def test_the_auto_choice_hit_rate_counts_only_seeds_where_the_two_differ_by_more_than_their_standard_error():
    # seeds 0-5: DP-GIBO clearly better (d = -0.1), 6-7: private RS clearly better (d = +0.1), 8-9: a tie (d = 0)
    d = [-0.1] * 6 + [0.1] * 2 + [0.0] * 2
    tune_losses = {s: 1.0 + x for s, x in enumerate(d)}
    prs_losses = {s: 1.0 for s in range(10)}
    se = statistics.stdev(d) / math.sqrt(10)  # independent: 0.0245..., below 0.1 and above 0
    assert 0 < se < 0.1
    chosen = {s: "dp_gibo" for s in range(10)}
    chosen[6] = "private_random_search"  # right on seed 6, wrong on 7
    chosen[0] = "dp_hypo"  # neither of the two: a miss
    chosen[8] = "private_random_search"  # on a tie: not counted
    h = mr.choice_hit_rate(chosen, {mt.TUNE: tune_losses, mt.PRIVATE_RS: prs_losses})
    assert (h["hits"], h["decided"], h["seeds"]) == (6, 8, 10)  # seeds 1-5 and 6 hit; 0 and 7 miss
    assert h["se"] == pytest.approx(se, rel=1e-12) and h["rate"] == 6 / 8 and not h["met"]
    chosen[0], chosen[7] = "dp_gibo", "private_random_search"
    h = mr.choice_hit_rate(chosen, {mt.TUNE: tune_losses, mt.PRIVATE_RS: prs_losses})
    assert (h["hits"], h["decided"], h["met"]) == (8, 8, True)
    # a seed without both alternatives is not counted; one common seed decides nothing
    h = mr.choice_hit_rate({0: "dp_gibo"}, {mt.TUNE: {0: 0.5, 1: 0.4}, mt.PRIVATE_RS: {0: 0.9}})
    assert (h["seeds"], h["decided"], h["met"]) == (1, 0, False) and math.isnan(h["rate"])


def test_the_report_renders_the_hit_rate_from_a_synthetic_store():
    s = dataclasses.replace(mt.quick_settings(), seeds=tuple(range(4)), epsilons=(3.0,), tune_auto_proxy=True)
    runs = _runs([0.5, 0.9, 0.5, 0.9], [0.9, 0.5, 0.9, 0.5])
    for seed, method in enumerate(["dp_gibo", "private_random_search", "private_random_search", "dp_gibo"]):
        runs.append(
            Run(
                "mixed",
                mt.TUNE_AUTO,
                seed,
                3.0,
                [1],
                [0.7],
                0.7,
                1.0,
                0.0,
                epsilon=3.0,
                extra={"test_loss": 0.7, "test_accuracy": 0.5, "chosen_method": method},
            )  # fmt: skip
        )
    data = mr.summary(s, runs)
    assert data["hit_rate"]["3"]["hits"] == 2 and data["hit_rate"]["3"]["decided"] == 4
    md = mr.report_text(s, {}, runs, "cmd")
    assert "| 3 | 2 / 4 | 4 |" in md and "not met" in md


def test_the_auto_choice_hit_rate_counts_dp_hypo_as_a_third_alternative():
    # DP-HyPO lowest on seeds 0-5 (by 0.1 against DP-GIBO), DP-GIBO lowest on 6-9 (by 0.1 against DP-HyPO);
    # private random search is far behind everywhere, so the two best are DP-HyPO and DP-GIBO on every seed
    hypo = {s: 0.9 if s < 6 else 1.1 for s in range(10)}
    gibo = {s: 1.0 for s in range(10)}
    prs = {s: 2.0 for s in range(10)}
    chosen = {s: "dp_hypo" if s < 6 else "dp_gibo" for s in range(10)}
    chosen[9] = "private_random_search"  # the worst: a miss
    h = mr.choice_hit_rate(chosen, {mt.TUNE: gibo, mt.PRIVATE_RS: prs, mt.DP_HYPO: hypo})
    d = [-0.1] * 6 + [0.1] * 4  # hypo - gibo
    assert h["se"] == pytest.approx(statistics.stdev(d) / math.sqrt(10), rel=1e-12)
    assert (h["hits"], h["decided"], h["seeds"]) == (9, 10, 10) and h["met"]
    assert h["per_seed"][0]["best"] == mt.DP_HYPO and h["per_seed"][6]["second"] == mt.DP_HYPO
    # without DP-HyPO's arm, the choices of dp_hypo are misses against the two others
    h = mr.choice_hit_rate(chosen, {mt.TUNE: gibo, mt.PRIVATE_RS: prs})
    assert (h["hits"], h["decided"]) == (3, 10)
