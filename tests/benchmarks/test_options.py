"""benchmarks.options: every variant spends the same μ on at most plain DP-GIBO's
budget, the options reach the config, the public PCA basis comes from the public draw, and the
report counts paired wins."""

import dataclasses
import re

import pytest
import torch

from benchmarks import options
from benchmarks.cli import main
from botorch_dp.optim.subspace import FixedSubspace, PosteriorGradientCovarianceSubspace


@pytest.fixture(scope="module")
def quick_gp(tmp_path_factory):
    out = tmp_path_factory.mktemp("options")
    result = main(["run", "options", "--quick", "--set", "tasks=gp", "--out", str(out), "--no-progress"])
    return result, out


def test_every_variant_spends_the_same_mu_within_plains_budget(quick_gp):
    result, _ = quick_gp
    settings = options.quick_settings()
    runs = result["runs"]
    assert sorted(r.method for r in runs) == sorted([*options.VARIANTS, "posterior_subspace+adaptive_norm"])
    plain = next(r for r in runs if r.method == "plain")
    assert plain.num_evaluations == settings.iterations * (settings.gp_dim + 1)
    for r in runs:
        assert r.extra["mu"] == pytest.approx(settings.privacy_mu, rel=1e-9)
        assert r.epsilon == pytest.approx(plain.epsilon, rel=1e-9)
        assert r.num_evaluations <= plain.num_evaluations
        if "adaptive" not in r.method:
            assert r.num_evaluations == plain.num_evaluations


def test_variants_reach_the_config(quick_gp):
    result, _ = quick_gp
    settings = options.quick_settings()
    runner = options.Runner(settings, result["context"])
    _, cfg = runner.config("gp", "posterior_subspace", 0)
    assert isinstance(cfg.projection.oracle, PosteriorGradientCovarianceSubspace)
    assert cfg.projection.oracle.k == settings.subspace_k
    _, cfg = runner.config("gp", "public_pca", 0)
    assert isinstance(cfg.projection.oracle, FixedSubspace)
    _, cfg = runner.config("gp", "adagrad_full", 0)
    assert cfg.step_rule.name == "adagrad_full"
    _, cfg = runner.config("gp", "adaptive_norm_min", 0)
    assert (cfg.noise.name, cfg.selection.name) == ("adaptive_norm", "min_noisy_norm")
    _, cfg = runner.config("gp", "posterior_subspace+adaptive_norm", 0)
    assert isinstance(cfg.projection.oracle, PosteriorGradientCovarianceSubspace) and cfg.noise.name == "adaptive_norm"
    _, plain = runner.config("gp", "plain", 0)
    assert (plain.projection.name, plain.step_rule.name, plain.noise.name, plain.selection.name) == (
        "none",
        "adagrad",
        "fixed",
        "last",
    )


def test_public_pca_basis_is_orthonormal_and_from_the_public_draw(quick_gp):
    result, _ = quick_gp
    settings = options.quick_settings()
    V = torch.tensor(result["context"]["pca_basis"]["gp"], dtype=torch.float64)
    assert V.shape == (settings.gp_dim, settings.subspace_k)
    torch.testing.assert_close(V.T @ V, torch.eye(settings.subspace_k, dtype=torch.float64), atol=1e-10, rtol=0)
    # recomputed from the pilot seed's draw; a draw of a run seed gives another basis
    assert torch.equal(V, torch.tensor(options._public_pca_basis(settings, "gp"), dtype=torch.float64))
    other_settings = dataclasses.replace(settings, pilot_seed=0)
    other = torch.tensor(options._public_pca_basis(other_settings, "gp"), dtype=torch.float64)
    assert not torch.allclose(other.abs(), V.abs(), atol=1e-3)


def test_report_counts_paired_wins_against_plain(quick_gp):
    result, out = quick_gp
    text = (out / "options.md").read_text()
    plain = next(r for r in result["runs"] if r.method == "plain")
    for r in result["runs"]:
        if r.method == "plain":
            continue
        row = next(line for line in text.splitlines() if line.startswith(f"| {r.method} |"))
        assert re.search(rf"\| {int(r.final_loss < plain.final_loss)}/1 \|", row), row


def test_another_selection_of_variants_reuses_the_store(quick_gp):
    # variants and combination only select jobs: a second combination and a subset of the
    # variants run in the same store, and only the new combination is run
    result, out = quick_gp
    again = main(
        [
            "run",
            "options",
            "--quick",
            "--set",
            "tasks=gp",
            "--set",
            "variants=plain,adaptive_norm",
            "--set",
            "combination=adagrad_full,adaptive_norm",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert again["ran"] == 1 and again["stored"] == len(result["runs"])
    assert [r.method for r in again["runs"]] == ["plain", "adaptive_norm", "adagrad_full+adaptive_norm"]
    before = {r.method: r.final_loss for r in result["runs"]}
    assert all(before[r.method] == r.final_loss for r in again["runs"][:2])
    _, cfg = options.Runner(options.quick_settings(), result["context"]).config("gp", "adagrad_full+adaptive_norm", 0)
    assert (cfg.step_rule.name, cfg.noise.name) == ("adagrad_full", "adaptive_norm")
    with pytest.raises(ValueError, match="'adagrad_full\\+sgd' is not one of"):
        options.variant_changes(options.quick_settings(), result["context"], "gp", "adagrad_full+sgd", 4)


def test_settings_refuse_conflicting_or_unknown_choices():
    quick = options.quick_settings()
    with pytest.raises(ValueError, match="combination: 'public_pca' sets projection"):
        dataclasses.replace(quick, combination=("posterior_subspace", "public_pca"))
    with pytest.raises(ValueError, match="combination must name two or more"):
        dataclasses.replace(quick, combination=("plain",))
    with pytest.raises(ValueError, match="tasks must name"):
        dataclasses.replace(quick, tasks=("mnist",))
    with pytest.raises(ValueError, match="variants must name"):
        dataclasses.replace(quick, variants=("sgd",))
