"""Tests for scripts/tune_torch_model.py: the script's JSON keeps non-private values out of
the release, and both guarantees are accounted (the validation data's μ-GDP, the training
data's ε composed over every DP-SGD run)."""

import json

import pytest
import torch
from opacus.accountants import RDPAccountant

from botorch_dp.tuning import default_mlp_space
from tests.helpers import loaded_script


@pytest.fixture(scope="module")
def script():
    with loaded_script("tune_torch_model") as module:
        yield module


def _keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dp_train", [False, True], ids=["plain", "dp_train"])
def test_script_quick_run_separates_private_and_non_private(script, tmp_path, dp_train):
    argv = ["--quick", "--no-progress", "--out", str(tmp_path)] + (["--dp-train"] if dp_train else [])
    summary = script.main(argv)
    on_disk = json.loads((tmp_path / script.RESULT_FILE).read_text())
    assert on_disk["private_release"] == json.loads(json.dumps(summary["private_release"]))
    assert (tmp_path / script.PLOT_FILE).stat().st_size > 0

    release = on_disk["private_release"]
    assert set(release) == {
        "hyperparameters",
        "theta_unit_cube",
        "iterates",
        "iterates_unit_cube",
        "evaluation_points",
        "batch_sizes",
        "posterior_traces",
        "released_gradients",
        "guarantees",
    }
    keys = set(_keys(release))
    assert not any("loss" in k or "accuracy" in k for k in keys), keys
    # natural units are the unit-cube coordinates mapped through the public space
    space = default_mlp_space()
    theta = torch.tensor(release["theta_unit_cube"], dtype=torch.float64)
    for name, value in space.to_natural(theta).items():
        assert release["hyperparameters"][name] == pytest.approx(value)
    T = 2
    assert len(release["iterates"]) == T + 1 and len(release["batch_sizes"]) == T
    assert len(release["evaluation_points"]) == sum(release["batch_sizes"])

    val = release["guarantees"]["validation_data"]
    assert val["mu"] == pytest.approx(1.0) and val["epsilon"] == pytest.approx(4.3772, abs=1e-3)
    train = release["guarantees"]["training_data"]
    if dp_train:
        n_runs = sum(release["batch_sizes"]) + 2  # evaluations + final model + baseline
        assert train["protected"] and train["num_runs"] == n_runs
        accountant = RDPAccountant()
        per = train["per_run"]
        accountant.history = [(per["noise_multiplier"], per["sample_rate"], per["steps"])] * n_runs
        assert train["epsilon"] == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-10)
        assert "pilot on public synthetic data" in on_disk["public_settings"]["noise_variance_source"]
    else:
        assert train["protected"] is False and train["epsilon"] == "inf"

    assert on_disk["public_settings"]["privacy_noise"] == "OS entropy"
    diag = on_disk["NON_PRIVATE_diagnostics"]
    assert "NON-PRIVATE" in diag["WARNING"]
    for key in ("final_theta", "initial_theta0"):
        assert 0.0 <= diag[key]["test_accuracy"] <= 1.0 and diag[key]["validation_loss"] > 0


@pytest.mark.timeout(240)
def test_script_never_writes_the_noise_seed(script, tmp_path, capsys):
    from botorch_dp.privacy.seeding import PrivacyWarning
    from botorch_dp.utils import child_seeds

    noise_seed = 987654321
    argv = ["--quick", "--no-progress", "--no-plot", "--dp-train", "--noise-seed", str(noise_seed)]
    with pytest.warns(PrivacyWarning):
        first = script.main(argv + ["--out", str(tmp_path / "a")])
    out = capsys.readouterr()
    text = (tmp_path / "a" / script.RESULT_FILE).read_text()
    # the seed and every seed derived from it (DP-GIBO's stream, the DP-SGD base and per-run seeds)
    gibo_seed, sgd_seed = child_seeds(noise_seed, 2)
    num_runs = first["private_release"]["guarantees"]["training_data"]["num_runs"]
    run_seeds = [child_seeds([sgd_seed, i], 1)[0] for i in range(num_runs)]
    for secret in [noise_seed, gibo_seed, sgd_seed, *run_seeds, *child_seeds([gibo_seed, 0], 1)]:
        for where in (text, out.out, out.err):
            assert str(secret) not in where
    keys = set(_keys(json.loads(text)))
    assert {k for k in keys if "seed" in k} == {"public_seed"}
    assert json.loads(text)["public_settings"]["privacy_noise"].startswith("seeded")
    # an explicit noise seed reproduces the release
    with pytest.warns(PrivacyWarning):  # this time with the plot (public panels, incl. ε spent)
        again = script.main([a for a in argv if a != "--no-plot"] + ["--out", str(tmp_path / "b")])
    assert again["private_release"] == first["private_release"]
    assert (tmp_path / "b" / script.PLOT_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(240)
def test_script_targets_epsilon_for_both_guarantees(script, tmp_path):
    from botorch_dp.privacy.analysis.gdp import gdp_mu

    argv = [
        "--quick",
        "--no-progress",
        "--no-plot",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--dp-train",
        "--dp-train-epsilon",
        "3",
        "--optimizer",
        "adam",
        "--out",
        str(tmp_path),
    ]
    release = script.main(argv)["private_release"]
    val = release["guarantees"]["validation_data"]
    assert val["mu"] == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-12) and val["epsilon"] == pytest.approx(1.0, rel=1e-9)
    train = release["guarantees"]["training_data"]
    # quick: T = 2 iterations of b = d + 1 = 4 points, plus the final model and the baseline
    assert train["planned_runs"] == 2 * 4 + 2 == train["num_runs"] and train["target_epsilon"] == 3.0
    per = train["per_run"]
    accountant = RDPAccountant()
    accountant.history = [(per["noise_multiplier"], per["sample_rate"], per["steps"])] * train["num_runs"]
    assert train["epsilon"] == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-10)
    assert 3.0 - 0.01 <= train["epsilon"] <= 3.0  # every planned run was used: the target, spent
