"""scripts/dimension_pilot_check.py and paper.pilot(theta=...): the θ₀ pilot draws its designs
around θ₀ only, the uniform pilot is unchanged, and the script's table counts what it ran."""

import dataclasses
import re

import torch

from benchmarks import dimension
from benchmarks.paper import pilot
from tests.helpers import loaded_script


def test_pilot_around_a_point_uses_only_that_point(monkeypatch):
    settings = dataclasses.replace(dimension.quick_settings(), pilot_points=3)
    problem = dimension.dimension_problem(settings, 3, settings.pilot_seed)
    seen = []
    original = type(problem).__call__

    def spy(self, X):
        seen.append(X.clone())
        return original(self, X)

    monkeypatch.setattr(type(problem), "__call__", spy)
    theta0 = problem.default_theta0()
    pilot(settings, problem, theta=theta0)
    assert len(seen) == 3
    for X in seen:  # every design lies in the search box around θ₀
        assert ((X - theta0).abs() <= settings.search_radius + 1e-12).all()
    seen.clear()
    pilot(settings, problem)
    centres = torch.stack([problem.sample_in_bounds(1, seed=settings.pilot_seed + j)[0] for j in range(3)])
    for X, c in zip(seen, centres, strict=True):  # the default draws around uniform θ, one per design
        assert ((X - c).abs() <= settings.search_radius + 1e-12).all()
        assert not ((X - theta0).abs() <= settings.search_radius).all()


def test_quick_run_reports_its_rows(capsys):
    with loaded_script("dimension_pilot_check") as script:
        rows = script.main(["--dims", "3", "--seeds", "0", "1", "--quick"])
    out = capsys.readouterr().out
    assert [r["seed"] for r in rows] == [0, 1]
    wins_uniform = sum(r["dp_gibo_uniform"] < r["private_rs"] for r in rows)
    wins_theta0 = sum(r["dp_gibo_theta0"] < r["private_rs"] for r in rows)
    assert re.search(rf"\| 3 \| 2 \| .* \| {wins_uniform}/2 / {wins_theta0}/2 \|", out), out
    assert all(r["budget"] > 0 for r in rows)
