"""Tests for botorch_dp.plot: what is drawn equals the closed forms and the release."""

from __future__ import annotations

import math
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from botorch_dp import plot  # noqa: E402
from botorch_dp.optim.dp_gibo import DPGIBO  # noqa: E402
from botorch_dp.privacy.analysis.gdp import gdp_epsilon  # noqa: E402
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon  # noqa: E402
from botorch_dp.privacy.ledger import (
    DPSGDRun,
    Gaussian,
    PrivacyLedger,  # noqa: E402
    PureDP,
    ValidationMechanism,
)
from botorch_dp.privacy.seeding import PrivacyWarning  # noqa: E402
from tests.optim.loop_helpers import nl_config, normal_location  # noqa: E402

T, MU, DELTA = 4, 1.0, 1e-5


@pytest.fixture(scope="module")
def finished():
    _, objective = normal_location(n=40, d=3)
    cfg = nl_config(d=3, num_iterations=T, privacy_mu=MU, seed=3, target_delta=DELTA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        opt = DPGIBO(cfg)
        opt.run(objective, progress=False)
    return opt, objective


def test_epsilon_spent_follows_the_gdp_closed_form(finished):
    opt, _ = finished
    points = plot.epsilon_spent(opt.ledger, DELTA)
    # T equal steps of μ/√T: after k steps μ√(k/T)
    assert [p.iteration for p in points] == list(range(1, T + 1))
    assert [p.label for p in points] == [f"step-{k:04d}" for k in range(T)]
    for k, p in enumerate(points, start=1):
        assert p.mu == pytest.approx(MU * math.sqrt(k / T), rel=1e-12)
        assert p.epsilon == pytest.approx(gdp_epsilon(MU * math.sqrt(k / T), DELTA), rel=1e-12)
    assert points[-1].epsilon == pytest.approx(opt.guarantee().epsilon, rel=1e-12)


def test_epsilon_spent_groups_a_steps_releases_and_keeps_other_stages():
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(0.3), run_id="a", key="step-0000/norm")
    ledger.external.record(Gaussian(0.4), run_id="a", key="step-0000/grad")
    ledger.external.record(Gaussian(0.5), run_id="b", key="step-0000")
    ledger.external.record(PureDP(0.5), run_id="a", key="select")
    points = plot.epsilon_spent(ledger, 1e-6)
    assert [(p.label, p.iteration) for p in points] == [("step-0000", 1), ("step-0000", 1), ("select", 1)]
    assert points[0].mu == pytest.approx(0.5)  # sqrt(0.3² + 0.4²)
    assert points[1].mu == pytest.approx(math.sqrt(0.5))
    assert points[-1].mu == pytest.approx(ledger.validation.mu())
    only_a = plot.epsilon_spent(ledger, 1e-6, run_id="a")
    assert len(only_a) == 2 and only_a[-1].mu == pytest.approx(ledger.validation.mu("a"))
    assert plot.epsilon_spent(PrivacyLedger(), 1e-6) == []
    with pytest.raises(ValueError, match="delta"):
        plot.epsilon_spent(ledger, 1.5)
    with pytest.raises(TypeError, match="ledger"):
        plot.epsilon_spent({}, 1e-6)


def test_epsilon_spent_composes_in_rdp_when_a_release_has_only_a_curve():
    ledger = PrivacyLedger()
    ledger.external.record(Gaussian(0.3), run_id="a", key="step-0000/norm")
    ledger.external.record(Gaussian(0.4), run_id="a", key="step-0000/grad")
    ledger.external.record(ValidationMechanism.from_rdp("curve", lambda a: 0.5 + a / 8.0), run_id="h", key="select")
    ledger.external.record(Gaussian(0.5), run_id="a", key="step-0001")
    points = plot.epsilon_spent(ledger, 1e-6)
    assert [(p.label, p.iteration) for p in points] == [("step-0000", 1), ("select", 1), ("step-0001", 2)]
    assert all(math.isnan(p.mu) for p in points)
    orders = PrivacyLedger.RDP_ORDERS
    first = [a * 0.25 / 2 for a in orders]  # 0.3² + 0.4² = 0.5²: the step's exact curve α μ²/2
    assert points[0].epsilon == pytest.approx(rdp_curve_epsilon(first, orders, 1e-6)[0], rel=1e-12)
    assert points[-1].epsilon == pytest.approx(ledger.validation.epsilon(1e-6), rel=1e-12)
    assert [p.epsilon for p in points] == sorted(p.epsilon for p in points)
    only_a = plot.epsilon_spent(ledger, 1e-6, run_id="a")  # a run without RDP entries: GDP as before
    assert only_a[-1].mu == pytest.approx(ledger.validation.mu("a")) == pytest.approx(math.sqrt(0.5))


def test_plot_privacy_draws_the_spending_and_the_budget():
    ledger = PrivacyLedger(validation_mu_budget=2.0)
    for t in range(3):
        ledger.external.record(Gaussian(1.0), run_id="r", key=f"step-{t:04d}")
    ax = plot.plot_privacy(ledger, delta=1e-5)
    line = ax.get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), [0, 1, 2, 3])
    np.testing.assert_allclose(line.get_ydata(), [0.0] + [gdp_epsilon(math.sqrt(k), 1e-5) for k in (1, 2, 3)])
    assert ax.get_lines()[1].get_ydata()[0] == pytest.approx(gdp_epsilon(2.0, 1e-5))
    with pytest.raises(ValueError, match="delta is required"):
        plot.plot_privacy(ledger)
    plt.close("all")


def test_plot_loss_uses_the_public_proxy_or_refuses(finished):
    opt, objective = finished
    release = opt.result().release
    ax = plot.plot_loss(release, proxy=objective)  # per-user losses of a (here: the same, synthetic) population
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), objective(release.iterates).mean(-1).numpy())
    ax = plot.plot_loss(release, proxy=lambda X: X.pow(2).sum(-1))
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), release.iterates.pow(2).sum(-1).numpy())
    with pytest.raises(ValueError, match="released no losses"):
        plot.plot_loss(release)
    with pytest.raises(ValueError, match="proxy must map"):
        plot.plot_loss(release, proxy=lambda X: torch.zeros(3))
    plt.close("all")


def test_plot_iterate_path_draws_the_released_iterates(finished):
    opt, _ = finished
    release = opt.result().release
    ax = plot.plot_iterate_path(release, dims=(2, 0))
    path = ax.get_lines()[0]
    np.testing.assert_array_equal(path.get_xdata(), release.iterates[:, 2].numpy())
    np.testing.assert_array_equal(path.get_ydata(), release.iterates[:, 0].numpy())
    for bad in [(0, 0), (0, 3), (0,)]:
        with pytest.raises(ValueError, match="dims"):
            plot.plot_iterate_path(release, dims=bad)
    fig = plot.plot_run(opt, proxy=lambda X: X.pow(2).sum(-1))
    assert len(fig.axes) == 3
    assert len(plot.plot_run(opt).axes) == 2  # no loss panel without a proxy or released losses
    plt.close("all")


def test_the_path_is_drawn_by_hyperparameter_name_in_natural_units(finished):
    from botorch_dp.tuning import Hyperparameter, SearchSpace

    opt, _ = finished
    release = opt.result().release
    space = SearchSpace(
        [
            Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
            Hyperparameter("momentum", 0.0, 0.9),
            Hyperparameter("dropout", 0.0, 0.5),
        ]
    )
    ax = plot.plot_iterate_path(release, dims=(0, 2), space=space)
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_xscale(), ax.get_yscale()) == ("lr", "dropout", "log", "linear")
    natural = space.to_natural(release.iterates)
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), [row["lr"] for row in natural], rtol=1e-12)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [row["dropout"] for row in natural], rtol=1e-12)
    with pytest.raises(ValueError, match="space has dim 1"):
        plot.plot_iterate_path(release, space=SearchSpace([Hyperparameter("lr", 1e-4, 1e-1)]))
    fig = plot.plot_run(opt, space=space)
    assert fig.axes[-1].get_xlabel() == "lr"
    plt.close("all")


def test_the_privacy_panel_shows_the_training_epsilon_when_candidates_were_trained_privately(finished):
    opt, _ = finished
    ledger = PrivacyLedger()
    for t, rec in enumerate(opt.ledger.validation.records()):
        ledger.external.record(Gaussian(rec.event.mu), run_id="r", key=f"step-{t:04d}")
    ax = plot.plot_privacy(ledger, delta=1e-5)
    assert not any("training" in t.get_text() for t in ax.get_legend().get_texts())
    ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=500), run_id=0)
    ax = plot.plot_privacy(ledger, delta=1e-5)
    eps = ledger.training.epsilon(1e-5)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"training ε = {eps:.3g} (δ = 1e-05)" in labels
    assert any(len(line.get_ydata()) == 2 and np.allclose(line.get_ydata(), [eps, eps]) for line in ax.get_lines())
    plt.close("all")


def test_progress_bar_shows_epsilon_spent(capsys):
    _, objective = normal_location(n=40, d=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        opt = DPGIBO(nl_config(d=3, num_iterations=2, privacy_mu=MU, seed=3, target_delta=DELTA))
        opt.run(objective, progress=True)
    err = capsys.readouterr().err
    assert f"eps={opt.guarantee().epsilon:.3g}" in err
