"""benchmarks.dimension: the quick experiment end to end through the contract of
benchmarks.experiment (shared budgets, calibrated privacy, head-room), and its parts (the task
family: test_dimension_task.py; the report: test_dimension_report.py)."""

import dataclasses
import warnings

import pytest

from benchmarks import dimension as D
from benchmarks.experiment import REQUIRED_MEMBERS, load_experiment
from botorch_dp.privacy.analysis.gdp import gdp_epsilon


@pytest.fixture
def quick(dimension_quick):
    return dimension_quick


def test_registered_and_complete():
    module = load_experiment("dimension")
    assert module is D
    assert all(hasattr(D, m) for m in REQUIRED_MEMBERS)
    for f in dataclasses.fields(D.Settings):  # plain fields only
        value = getattr(D.quick_settings(), f.name)
        assert value is None or isinstance(value, (int, float, str, bool, tuple)), f.name


def test_every_cell_shares_dp_gibo_budget_and_privacy(quick):
    s, runs = quick["settings"], quick["runs"]
    main = {(r.setting, r.seed): r for r in runs if r.experiment == "dimension" and r.extra["key"] == "dp_gibo"}
    # quick: d = 2 on seeds 0, 1 with every method; d = 3 (high-d rule) on seed 0 with two methods
    assert set(main) == {(2, 0), (2, 1), (3, 0)}
    keys = {}
    target = gdp_epsilon(s.privacy_mu, s.target_delta)
    for r in runs:
        if r.experiment != "dimension":
            continue
        keys.setdefault(r.setting, set()).add(r.extra["key"])
        ref = main[(r.setting, r.seed)]
        assert r.num_evaluations == ref.num_evaluations, (r.method, r.setting, r.seed)
        assert ref.num_evaluations == s.iterations * (r.setting + 1)  # fixed batches of d + 1
        if r.extra["key"] in ("dp_gibo", "dp_gibo_eta1", "private_rs"):
            assert r.epsilon == pytest.approx(target, rel=1e-8)
        elif r.extra["key"] == "dp_hypo":
            assert target - 1e-3 <= r.epsilon <= target + 1e-9
        else:
            assert r.epsilon is None
    assert keys[2] == set(D.METHODS)
    assert keys[3] == {"dp_gibo", "random_search"}


def test_headroom_measured_and_reported(quick):
    heads = [r for r in quick["runs"] if r.experiment == "headroom"]
    assert {(r.setting, r.seed) for r in heads} == {(2, 0), (2, 1), (3, 0)}
    for r in heads:
        e = r.extra
        problem = D.dimension_problem(quick["settings"], r.setting, r.seed)
        assert e["loss_theta0"] == pytest.approx(float(problem.objective(problem.default_theta0())))
        assert e["loss_zero"] == pytest.approx(float(problem.val_Y.square().mean()))
        assert e["headroom_ratio"] == pytest.approx((e["loss_theta0"] - e["loss_truth"]) / e["loss_theta0"])
    text = quick["md"].read_text()
    ratios = [r.extra["headroom_ratio"] for r in heads if r.setting == 2]
    assert "| 2 | 2 |" in text and f"{sum(ratios) / 2:.3f} | {min(ratios):.3f} |" in text


def test_job_is_deterministic(quick):
    s, context = quick["settings"], quick["context"]
    runner = D.make_runner(s, context)
    jobs = quick["jobs"]
    for i, job in enumerate(jobs):
        if job.kind in ("gibo", "private_selection") and job.kwargs["dim"] == 2 and job.kwargs["seed"] == 1:
            kwargs = dict(job.kwargs)
            if job.budget_from is not None:
                kwargs["budget"] = quick["runs"][job.budget_from].num_evaluations
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                again = runner(job.kind, kwargs)
            assert dataclasses.replace(again, wall_s=0.0) == dataclasses.replace(quick["runs"][i], wall_s=0.0)


def test_unknown_method_refused():
    s = dataclasses.replace(D.quick_settings(), methods=("dp_gibo", "bogus"))
    with pytest.raises(ValueError, match="bogus"):
        D.experiment_jobs(s, {})


def test_pilot_at_theta0_draws_around_the_start(quick):
    s = dataclasses.replace(D.quick_settings(), dims=(3,))
    assert s.pilot_at == "theta0"  # the default
    context = D.prepare(s)
    problem = D.dimension_problem(s, 3, s.pilot_seed)
    from benchmarks.paper import pilot

    assert context["pilot_theta0"]["3"] == pilot(s, problem, theta=problem.default_theta0())
    assert context["pilot"]["3"] == pilot(s, problem) == quick["context"]["pilot"]["3"]
    uniform = D.prepare(dataclasses.replace(s, pilot_at="uniform"))
    assert uniform == {"pilot": context["pilot"]}
    assert D.clip_bound(context, 3) == context["pilot_theta0"]["3"]["clip_bound"]
    assert D.clip_bound(uniform, 3) == context["pilot"]["3"]["clip_bound"] != D.clip_bound(context, 3)
    with pytest.raises(ValueError, match="pilot_at"):
        dataclasses.replace(s, pilot_at="centre")


def test_theta0_pilot_sets_only_dp_gibos_clip_bound(monkeypatch):
    s = dataclasses.replace(D.quick_settings(), dims=(3,))
    context = D.prepare(s)
    contexts = {"both": context, "uniform": {"pilot": context["pilot"]}, "theta0": {"pilot": context["pilot_theta0"]}}
    clips = {}

    def spy(name):
        def private_random_search(*args, loss_clip, **kwargs):
            clips[name] = loss_clip
            return real(*args, loss_clip=loss_clip, **kwargs)

        return private_random_search

    real = D.private_random_search
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gibo = {name: D.Runner(s, c).gibo(3, 0, "dp_gibo").final_loss for name, c in contexts.items()}
        for name, c in contexts.items():
            monkeypatch.setattr(D, "private_random_search", spy(name))
            D.Runner(s, c).private_selection(3, 0, "private_rs", 12)
    assert gibo["both"] == gibo["theta0"] != gibo["uniform"]  # B from the θ₀ pilot
    assert clips["both"] == clips["uniform"] == context["pilot"]["3"]["loss_clip"]  # C from the uniform pilot
    assert clips["theta0"] != clips["both"]


def test_method_limits_only_select_jobs(tmp_path):
    # raising a method's d limit adds its cells to the same store; every earlier run is reused
    from benchmarks.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = main(["run", "dimension", "--quick", "--out", str(tmp_path), "--no-progress"])
        more = main(
            ["run", "dimension", "--quick", "--set", "ucb_bo_max_dim=3", "--out", str(tmp_path), "--no-progress"]
        )
    assert first["ran"] == len(first["runs"]) and more["stored"] == first["ran"]
    added = [r for r in more["runs"] if r not in first["runs"]]
    assert more["ran"] == len(added) >= 1 and {(r.setting, r.extra["key"]) for r in added} == {(3, "ucb_bo")}


def test_dp_hypo_batched_from_sets_the_jobs_density_cadence():
    s = dataclasses.replace(D.quick_settings(), dims=(2, 3), high_dim_from=0, dp_hypo_max_dim=3, dp_hypo_batched_from=3)
    jobs = {
        (j.kwargs["dim"], j.kwargs["seed"]): j.kwargs
        for j in D.experiment_jobs(s, {})
        if j.kwargs.get("method") == "dp_hypo"
    }
    assert jobs[(2, 0)] == dict(dim=2, seed=0, method="dp_hypo")  # per trial: the key of a per-trial run
    assert jobs[(3, 0)] == dict(
        dim=3, seed=0, method="dp_hypo", density_update_every=4, max_points=s.dp_hypo_batched_max_points
    )
    assert {"dp_hypo_batched_from", "dp_hypo_batched_max_points"} <= set(D.SELECTION_FIELDS)
    unfit = dataclasses.replace(s, dp_hypo_batched_max_points=0)
    assert [j.kwargs for j in D.experiment_jobs(unfit, {}) if j.kwargs.get("method") == "dp_hypo"][-1] == dict(
        dim=3, seed=0, method="dp_hypo", density_update_every=4
    )
