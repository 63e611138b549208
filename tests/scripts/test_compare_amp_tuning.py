"""scripts/compare_amp_tuning.py --quick: every method runs on both data sets, every
training guarantee is within its ε, the validation sides are what they claim, and the
report, the runs and the plot are written."""

import json
import math

import pytest

from botorch_dp.privacy.analysis.gdp import gdp_mu
from tests.helpers import loaded_script


@pytest.fixture(scope="module")
def script():
    with loaded_script("compare_amp_tuning") as module:
        yield module


@pytest.fixture(scope="module")
def quick(script, tmp_path_factory):
    out = tmp_path_factory.mktemp("amp_tuning")
    return out, script.main(["--quick", "--out", str(out), "--no-progress"])


@pytest.mark.timeout(300)
def test_quick_run_reports_every_method_within_its_budget(script, quick):
    tmp_path, result = quick
    settings = script.Settings.quick()
    runs = result["runs"]
    methods = script.METHODS + ("non_private",)
    assert sorted((r.experiment, r.method) for r in runs) == sorted((d, m) for d in settings.datasets for m in methods)
    (eps,) = settings.epsilons
    for r in runs:
        ex = r.extra
        assert 0.0 <= ex["test_accuracy"] <= 1.0 and r.final_loss == pytest.approx(1.0 - ex["test_accuracy"])
        if r.method == "non_private":
            assert math.isinf(ex["training_epsilon"])
            continue
        assert ex["training_epsilon"] <= eps * (1 + 1e-9)
        if r.method == "dp_gibo":
            assert ex["validation_mu"] == pytest.approx(gdp_mu(eps, settings.delta), rel=1e-9)
            assert ex["validation_epsilon"] == pytest.approx(eps, rel=1e-6)
            assert ex["training_epsilon_ledger"] <= ex["training_epsilon"] + 1e-12
            assert ex["training_runs"] == settings.gibo_runs
        elif r.method.startswith("ps_"):
            assert ex["validation_epsilon"] <= eps * (1 + 1e-6) and ex["training_epsilon"] == pytest.approx(
                eps, rel=1e-3
            )
        else:
            assert ex["validation_epsilon"] == 0.0 and ex["training_epsilon"] == pytest.approx(eps, rel=1e-6)
    text = (tmp_path / script.REPORT_MD).read_text()
    assert text == result["report"] and "`python scripts/compare_amp_tuning.py --quick" in text
    for label in script.LABELS.values():
        assert text.count(f"| {label} |") == len(settings.datasets)
    stored = json.loads((tmp_path / script.RUNS_JSON).read_text())
    assert len(stored["runs"]) == len(runs) and stored["command"] == (
        f"python scripts/compare_amp_tuning.py --quick --out {tmp_path} --no-progress"
    )
    assert (tmp_path / script.REPORT_PNG).read_bytes()[:4] == b"\x89PNG"


def test_plan_is_public_and_matches_the_budgets(script, quick):
    settings = script.Settings.quick()
    plan = quick[1]["plan"]
    entry = plan["per_epsilon"][repr(1.0)]
    gibo = script.AMPRunBudget(**entry["gibo_budget"])
    assert gibo.epsilon(settings.delta, settings.gibo_units) == pytest.approx(1.0, rel=1e-9)
    assert entry["gibo_mu"] == pytest.approx(gdp_mu(1.0, settings.delta))
    assert set(entry["dpsgd"]) == set(settings.datasets)
    json.dumps(plan)  # plain values only


def test_a_noise_seed_is_never_written(script):
    assert script.public_argv(["--quick", "--noise-seed", "123", "--out", "x"]) == [
        "--quick",
        "--noise-seed",
        "<not recorded>",
        "--out",
        "x",
    ]
    assert script.public_argv(["--noise-seed=123"]) == ["--noise-seed=<not recorded>"]


def test_render_rewrites_the_report_from_the_runs(script, quick):
    out, result = quick
    before = (out / script.REPORT_MD).read_text()
    rendered = script.main(["--render", "--out", str(out), "--no-plot"])
    after = (out / script.REPORT_MD).read_text()
    assert after == rendered["report"] and after.startswith(before)
    assert after[len(before) :] == (
        f"\nReport re-rendered from {script.RUNS_JSON} by `python scripts/compare_amp_tuning.py --render --out {out} "
        "--no-plot`.\n"
    )
    assert [r.extra for r in rendered["runs"]] == [r.extra for r in result["runs"]]
