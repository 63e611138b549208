"""benchmarks.cli and store: one command runs every experiment, resumes from its
run store, refuses a store made with other settings, and agrees with the paper harness."""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import paper_experiment
from benchmarks.cli import main, parse_value, settings_with
from benchmarks.experiment import EXPERIMENTS, REQUIRED_MEMBERS, load_experiment
from benchmarks.jobs import run_jobs
from benchmarks.runs import Run
from benchmarks.store import RunStore, canonical_json
from tests.benchmarks.test_jobs import _fake_jobs, fake_run_job
from tests.helpers import quick_reproduction

ROOT = Path(__file__).resolve().parents[2]


def _strip_wall(runs):
    return [dataclasses.replace(r, wall_s=0.0) for r in runs]


def _as_stored(runs):
    """Runs as they read back from JSON (tuples become lists)."""
    return [Run(**json.loads(json.dumps(dataclasses.asdict(r)))) for r in runs]


# ---------------------------------------------------------------------------- settings


def test_parse_value_follows_the_field_types():
    assert parse_value("3", int, "x") == 3
    assert parse_value("0.5", float, "x") == 0.5
    assert parse_value("inf", float, "x") == math.inf
    assert parse_value("none", float | None, "x") is None
    assert parse_value("2", int | None, "x") == 2
    assert parse_value("0, 1,2", tuple[int, ...], "x") == (0, 1, 2)
    assert parse_value("", tuple[int, ...], "x") == ()
    assert parse_value("no", bool, "x") is False
    with pytest.raises(ValueError, match="--set x: expected int"):
        parse_value("1.5", int, "x")


def test_settings_with_names_the_bad_field():
    s = paper_experiment.quick_settings()
    changed = settings_with(s, ["seeds=4,5", "gp_dim=3", "only=normal"])
    assert (changed.seeds, changed.gp_dim, changed.only) == ((4, 5), 3, ("normal",))
    with pytest.raises(ValueError, match="--set gp_dimm: not a settings field"):
        settings_with(s, ["gp_dimm=3"])
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        settings_with(s, ["gp_dim"])
    with pytest.raises(ValueError, match="only must name experiments"):
        settings_with(s, ["only=nosuch"])


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_registered_experiment_meets_the_contract(name):
    module = load_experiment(name)
    assert all(hasattr(module, m) for m in REQUIRED_MEMBERS)
    quick = module.quick_settings()
    assert isinstance(quick, module.Settings) and dataclasses.is_dataclass(quick)
    assert set(getattr(module, "SELECTION_FIELDS", ())) <= {f.name for f in dataclasses.fields(quick)}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_context_is_a_function_of_the_settings(name):
    # the store's header holds the context: one that changed between calls (a wall time,
    # say, as mlp's once held) would refuse every resume and every --render
    module = load_experiment(name)
    quick = module.quick_settings()
    assert canonical_json(module.prepare(quick)) == canonical_json(module.prepare(quick))


def test_unknown_experiment_is_refused():
    with pytest.raises(ValueError, match="unknown experiment 'nope'"):
        load_experiment("nope")


# ------------------------------------------------------------------------------- store


def test_store_round_trips_and_refuses_other_settings(tmp_path):
    path = tmp_path / "runs.jsonl"
    store = RunStore(path, {"experiment": "x", "settings": {"a": 1, "b": (1, 2)}})
    run = Run("e", "m", 0, 0.5, [0, 3], [1.0, 0.25], 0.25, 3, 1.5, epsilon=None, extra={"b": [1, 2]})
    key = store.key("dp", {"seed": 0, "setting": (1, 2)})
    assert key != store.key("dp", {"seed": 1, "setting": (1, 2)}) != store.key("rs", {"seed": 0, "setting": (1, 2)})
    store.add(key, run)
    again = RunStore(path, {"experiment": "x", "settings": {"a": 1, "b": [1, 2]}})
    assert again.get(key) == run and len(again) == 1
    assert again.key("dp", {"seed": 0, "setting": [1, 2]}) == key
    with pytest.raises(ValueError, match=r"settings: a \(stored 1, now 2\)"):
        RunStore(path, {"experiment": "x", "settings": {"a": 2, "b": [1, 2]}})
    other = RunStore(tmp_path / "other.jsonl", {"experiment": "x", "settings": {"a": 2, "b": [1, 2]}})
    assert other.key("dp", {"seed": 0, "setting": (1, 2)}) != key  # keys depend on the settings


def test_store_accepts_a_field_added_later_only_at_its_default(tmp_path):
    path = tmp_path / "runs.jsonl"
    old = RunStore(path, {"experiment": "x", "settings": {"a": 1}, "context": {"c": 2}})
    key = old.key("dp", {"seed": 0})
    run = Run("e", "m", 0, None, [0], [1.0], 1.0, 1, 0.1)
    old.add(key, run)
    defaults = {"a": 1, "new": (3, 4)}
    # the code gained a field "new": at its default the file's runs and keys stay valid
    grown = RunStore(
        path,
        {"experiment": "x", "settings": {"a": 1, "new": (3, 4)}, "context": {"c": 2}},
        added_field_defaults=defaults,
    )
    assert grown.get(grown.key("dp", {"seed": 0})) == run and grown.key("dp", {"seed": 0}) == key
    grown.add(grown.key("dp", {"seed": 1}), run)
    assert len(RunStore(path, {"experiment": "x", "settings": {"a": 1}, "context": {"c": 2}})) == 2
    # anything else is still another experiment: the new field elsewhere than its default,
    # no defaults given, another changed field, another context
    for settings, context, given in [
        ({"a": 1, "new": [5]}, {"c": 2}, defaults),
        ({"a": 1, "new": [3, 4]}, {"c": 2}, None),
        ({"a": 2, "new": [3, 4]}, {"c": 2}, defaults),
        ({"a": 1, "new": [3, 4]}, {"c": 3}, defaults),
    ]:
        with pytest.raises(ValueError, match="other settings"):
            RunStore(path, {"experiment": "x", "settings": settings, "context": context}, added_field_defaults=given)
    # a field the code dropped is a difference too
    with pytest.raises(ValueError, match="other settings"):
        RunStore(path, {"experiment": "x", "settings": {}, "context": {"c": 2}}, added_field_defaults=defaults)


def test_cli_field_defaults_are_the_dataclass_defaults():
    from benchmarks import dimension
    from benchmarks.cli import field_defaults

    defaults = field_defaults(dimension.Settings(dims=(5,), acqf_maxiter=3))
    assert defaults["dims"] == [5, 15, 30, 60, 100] and defaults["acqf_maxiter"] == 100
    assert set(defaults) == {f.name for f in dataclasses.fields(dimension.Settings)}


def test_store_drops_a_line_cut_short_and_refuses_foreign_files(tmp_path):
    path = tmp_path / "runs.jsonl"
    store = RunStore(path, {"experiment": "x"})
    run = Run("e", "m", 0, None, [0], [1.0], 1.0, 1, 0.1)
    store.add("k1", run)
    with open(path, "a") as f:
        f.write('{"key": "k2", "run": {"experim')  # killed mid-write
    reopened = RunStore(path, {"experiment": "x"})
    assert reopened.get("k1") == run and reopened.get("k2") is None
    reopened.add("k3", run)  # the cut line is gone, so the file stays valid
    assert RunStore(path, {"experiment": "x"}).get("k3") == run
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match="not a run store"):
        RunStore(foreign, {"experiment": "x"})


def test_run_jobs_resumes_from_the_store_after_a_failure(tmp_path):
    calls = []

    def counting(kind, kwargs):
        calls.append((kind, kwargs["seed"], kwargs["method"]))
        if len(calls) == 3 and fail:
            raise RuntimeError("killed")
        return fake_run_job(kind, kwargs)

    reference = run_jobs(_fake_jobs(), fake_run_job, progress=False)
    path = tmp_path / "runs.jsonl"
    fail = True
    with pytest.raises(RuntimeError, match="killed"):
        run_jobs(_fake_jobs(), counting, progress=False, store=RunStore(path, {"experiment": "fake"}))
    assert len(RunStore(path, {"experiment": "fake"})) == 2  # the two finished jobs are kept
    fail, calls = False, []
    resumed = run_jobs(_fake_jobs(), counting, progress=False, store=RunStore(path, {"experiment": "fake"}))
    assert len(calls) == 2  # only the two jobs that had not finished (job 3 reuses job 0)
    assert resumed == _as_stored(reference)
    calls = []
    assert run_jobs(_fake_jobs(), counting, progress=False, store=RunStore(path, {"experiment": "fake"})) == resumed
    assert calls == []


# --------------------------------------------------------------------------------- CLI


def test_cli_paper_agrees_with_the_harness_and_resumes(tmp_path, capsys):
    # one torch thread, as the harness's quick reproduction (torch's sums depend on the thread count)
    argv = [
        "run",
        "paper",
        "--quick",
        "--set",
        "only=normal,huber",
        "--out",
        str(tmp_path),
        "--no-progress",
        "--threads",
        "1",
    ]
    first = main(argv)
    assert first["ran"] == len(first["runs"]) > 0 and first["stored"] == 0
    harness = [r for r in quick_reproduction()["runs"] if r.experiment in ("normal", "huber")]
    assert _strip_wall(first["runs"]) == _strip_wall(harness)
    assert (tmp_path / "results.md").exists() and json.loads((tmp_path / "runs.json").read_text())["only"] == [
        "normal",
        "huber",
    ]
    again = main(argv)
    assert again["ran"] == 0 and again["stored"] == len(first["runs"])
    assert again["runs"] == _as_stored(first["runs"])
    # a seed list is a selection field: more seeds reuse the stored runs
    more = main([*argv, "--set", "normal_location_seeds=0,1"])
    assert more["stored"] == len(first["runs"]) and more["ran"] == 2  # two new normal-location runs
    # any other change of settings is refused, naming the field
    with pytest.raises(SystemExit, match="huber_mu"):
        main([*argv, "--set", "huber_mu=2"])
    capsys.readouterr()


def test_cli_errors_name_the_argument(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["run", "paper", "--quick", "--set", "gp_dimm=3", "--out", str(tmp_path)])
    assert "gp_dimm" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "paper", "--quick", "--workers", "0", "--out", str(tmp_path)])
    assert "--workers" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--render: .* not stored"):
        main(["run", "paper", "--quick", "--set", "only=huber", "--render", "--out", str(tmp_path)])


def test_cli_on_a_dask_cluster_gives_the_serial_runs(tmp_path):
    from distributed import LocalCluster

    argv = ["run", "paper", "--quick", "--set", "only=huber", "--set", "huber_iterations=5", "--no-progress"]
    serial = main([*argv, "--out", str(tmp_path / "serial")])
    # a scheduler address, as for a real cluster (an in-process one keeps the test fast)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        dask = main([*argv, "--out", str(tmp_path / "dask"), "--dask", cluster.scheduler_address])
    assert dask["ran"] == len(serial["runs"])
    assert _strip_wall(dask["runs"]) == _strip_wall(serial["runs"])


def test_module_entry_point_lists_the_experiments():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list"], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    ).stdout
    assert [line.split()[0] for line in out.splitlines()] == list(EXPERIMENTS)


def test_cli_amp_runs_within_budget_and_resumes(tmp_path):
    from botorch_dp.privacy.analysis.gdp import gdp_mu

    argv = [
        "run",
        "amp",
        "--quick",
        "--set",
        "datasets=breast_cancer",
        "--set",
        "methods=amp_calibrated,dp_gibo",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    first = main(argv)
    (eps,) = first["context"]["per_epsilon"]
    assert sorted(r.method for r in first["runs"]) == ["amp_calibrated", "dp_gibo"]
    for r in first["runs"]:
        assert r.extra["training_epsilon"] <= float(eps) * (1 + 1e-9)
        if r.method == "dp_gibo":
            assert r.extra["validation_mu"] == pytest.approx(gdp_mu(float(eps), 1e-5), rel=1e-9)
    assert (tmp_path / "amp_tuning.md").exists() and (tmp_path / "amp_tuning.png").exists()
    again = main(argv)
    assert again["ran"] == 0 and again["runs"] == _as_stored(first["runs"])
    # the CLI never sets a noise seed: nothing it writes mentions one
    for path in tmp_path.iterdir():
        if path.suffix in (".md", ".json", ".jsonl"):
            assert "noise_seed" not in path.read_text().replace('"noise_seed": null', "")


def test_cli_mlp_resumes_and_renders_from_its_store(tmp_path):
    argv = ["run", "mlp", "--quick", "--set", "seeds=0", "--out", str(tmp_path), "--no-progress"]
    first = main(argv)
    assert first["ran"] == len(first["runs"]) > 0
    again = main(argv + ["--render"])  # a second process's prepare gives the same header
    assert again["ran"] == 0 and again["runs"] == _as_stored(first["runs"])
    text = (tmp_path / "mlp_tuning.md").read_text()
    assert re.search(r"Total wall time: \d+ s \(pilot \d+ s; ", text), text
