"""benchmarks.e1 through the benchmark CLI: the runs are those of the investigation's
functions, random search is the package's random search, and the report counts wins at each
run's own budget."""

import dataclasses
import re

import pytest
import torch

from benchmarks import e1
from benchmarks.cli import main
from benchmarks.runs import iterate_curve
from botorch_dp.baselines import random_search


@pytest.fixture(scope="module")
def quick_cli(tmp_path_factory):
    out = tmp_path_factory.mktemp("e1")
    result = main(
        ["run", "e1", "--quick", "--set", "variants=centred", "--set", "seeds=0", "--out", str(out), "--no-progress"]
    )
    return result, out


def test_cli_runs_are_the_investigations_runs(quick_cli):
    result, _ = quick_cli
    settings = dataclasses.replace(e1.quick_settings(), variants=("centred",), seeds=(0,))
    clip = result["context"]["clips"]["centred"]
    assert clip == e1.variant_pilot(settings, "centred")["clip_bound"] > 0
    gibo = {r.method: r for r in result["runs"] if r.method in e1.METHODS}
    assert set(gibo) == set(e1.METHODS)
    (direct,) = e1.run_seed(settings, "centred", 0, clip, ("DP-GIBO (μ=1)",))
    run = gibo["DP-GIBO (μ=1)"]
    assert (run.final_loss, run.num_evaluations, run.extra["clip"]) == (
        direct["final_loss"],
        direct["num_evaluations"],
        clip,
    )


def test_random_search_curve_is_the_packages_random_search(quick_cli):
    result, _ = quick_cli
    (rs,) = [r for r in result["runs"] if r.method.startswith("random")]
    settings = e1.quick_settings()
    problem, _ = e1.make_problem(settings, e1.VARIANTS["centred"], 0)
    direct = iterate_curve(problem, random_search(problem, problem.bounds, num_evaluations=settings.rs_budget, seed=0))[
        1
    ]
    assert len(rs.losses) == settings.rs_budget
    torch.testing.assert_close(torch.tensor(rs.losses), torch.tensor(direct))


def test_report_counts_wins_at_each_runs_budget(quick_cli):
    result, out = quick_cli
    (rs,) = [r for r in result["runs"] if r.method.startswith("random")]
    text = (out / "e1.md").read_text()
    for run in (r for r in result["runs"] if r.method in e1.METHODS):
        expected = int(run.final_loss < rs.losses[int(run.num_evaluations) - 1])
        row = next(line for line in text.splitlines() if line.startswith("| centred |") and run.method in line)
        assert re.search(rf"\| {expected}/1 \|$", row), row


def test_settings_refuse_unknown_variants_and_methods():
    with pytest.raises(ValueError, match="variants must name"):
        dataclasses.replace(e1.quick_settings(), variants=("nope",))
    with pytest.raises(ValueError, match="methods must name"):
        dataclasses.replace(e1.quick_settings(), methods=("UCB",))
