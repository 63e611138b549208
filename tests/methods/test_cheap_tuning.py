"""Cheap tuning of a DP-SGD model: a subsample tuning phase or a public proxy, then one final run."""

import dataclasses
import functools
import math
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from opacus.accountants.analysis.rdp import compute_rdp

from botorch_dp.methods import cheap_tuning as ct
from botorch_dp.methods.cheap_plan import (
    DEFAULT_TUNING_SHARE,
    SHARE_GRID,
    SubsamplePlan,
    plan_subsample_tuning,
    subsample_phase_rdp,
)
from botorch_dp.methods.cheap_tuning import (
    choose_tuning_share,
    draw_poisson_subset,
    share_streams,
    tune_on_proxy_then_train,
    tune_on_subsample,
)
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, DPSGDRun, PrivacyLedger, TrainingMechanism
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective
from tests.methods.test_cheap_plan import _independent_phase_curve

EPS, DELTA = 3.0, 1e-5


def _split(n, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=g)
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).long()


@pytest.fixture
def objective():
    (Xt, yt), (Xv, yv) = _split(160, 0), _split(40, 1)
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])
    calls = []

    def sgd(params, **kwargs):
        calls.append(dict(kwargs))
        return torch.optim.SGD(params, **kwargs)

    training = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(4,))
    obj = TorchModelTuningObjective(
        (Xt, yt, Xv, yv), space, optimizer=sgd, training=training, dp_sgd=DPSGDConfig(noise_multiplier=1.0)
    )
    obj.optimizer_calls = calls
    return obj


def _proxy():
    (Xp, yp), (Xv, yv) = _split(80, 5), _split(30, 6)
    return (Xp, yp, Xv, yv)


def test_subsample_ledger_holds_one_amplified_phase_and_one_final_run(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=3, seed=0)
    ledger = objective.ledger
    plan = result.settings["plan"]
    records = ledger.training.records()
    assert len(records) == 2  # the phase (one mechanism, before any trial) and the final run: no per-trial record
    phase, final = records[0].event, records[1].event
    assert isinstance(phase, TrainingMechanism) and records[0].run_id == result.settings["phase_run_id"]
    assert isinstance(final, DPSGDRun) and records[1].run_id == "eval-0000-final"
    q, steps = 1 / 8, 8  # 160 records, batch 20: k = 8 batches, one epoch
    expected = _independent_phase_curve(plan.trial_noise_multiplier, q, steps, 3, 0.3)
    assert np.allclose(phase.rdp, expected, rtol=1e-9)
    assert final == DPSGDRun(plan.final_noise_multiplier, q, steps)
    final_curve = np.asarray(
        compute_rdp(q=q, noise_multiplier=plan.final_noise_multiplier, steps=steps, orders=TRAINING_RDP_ORDERS)
    )
    total = rdp_curve_epsilon(expected + final_curve, TRAINING_RDP_ORDERS, DELTA)[0]
    assert ledger.training.epsilon(DELTA) == pytest.approx(total, rel=1e-9)
    assert EPS * 0.99 <= total <= EPS  # the whole budget, never more
    assert result.guarantee["training records"] == (pytest.approx(total, rel=1e-9), DELTA)
    # the amplification is real: the same trials without the subset would spend more
    assert plan.tuning_epsilon < plan.tuning_epsilon_unamplified


def test_the_subset_is_drawn_once_and_every_trial_trains_on_it(objective, monkeypatch):
    drawn, trained_sizes = [], []
    real_draw, real_rows = ct.draw_poisson_subset, ct._with_rows

    def counting_draw(*args, **kwargs):
        drawn.append(real_draw(*args, **kwargs))
        return drawn[-1]

    def spy_rows(data, rows):
        trained_sizes.append(rows.clone())
        return real_rows(data, rows)

    monkeypatch.setattr(ct, "draw_poisson_subset", counting_draw)
    monkeypatch.setattr(ct, "_with_rows", spy_rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=4, seed=0)
    assert len(drawn) == 1
    assert len(trained_sizes) == 1 and torch.equal(trained_sizes[0], drawn[0])  # one subset for all 4 trials


def test_the_subset_size_is_binomial_and_each_record_is_in_it_with_probability_gamma():
    m, gamma, draws = 400, 0.3, 400
    masks = np.zeros((draws, m))
    for s in range(draws):
        masks[s, draw_poisson_subset(m, gamma, seed=s).numpy()] = 1
    sizes = masks.sum(1)
    assert abs(sizes.mean() - m * gamma) < 4 * math.sqrt(m * gamma * (1 - gamma) / draws)
    assert sizes.var(ddof=1) == pytest.approx(m * gamma * (1 - gamma), rel=0.2)
    per_record = masks.mean(0)  # each record: Binomial(draws, γ)/draws
    assert np.all(np.abs(per_record - gamma) < 5 * math.sqrt(gamma * (1 - gamma) / draws))


def test_the_final_run_carries_the_chosen_lr_and_the_trials_shape(objective):
    configs = [{"lr": 0.002}, {"lr": 0.05}, {"lr": 0.4}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=configs)
    plan = result.settings["plan"]
    lrs = [c["lr"] for c in objective.optimizer_calls]
    assert len(lrs) == 4  # three trials, then the final run
    assert lrs[:3] == pytest.approx([0.002, 0.05, 0.4])
    assert lrs[3] == pytest.approx(result.hyperparameters["lr"])  # the rule: the lr carried unchanged
    assert any(result.hyperparameters["lr"] == pytest.approx(lr) for lr in lrs[:3])
    final = objective.ledger.training.records()[-1].event
    assert (final.sample_rate, final.steps) == (plan.sample_rate, plan.steps)  # trials' q and steps
    assert final.noise_multiplier == plan.final_noise_multiplier != plan.trial_noise_multiplier
    assert "carried unchanged" in result.carried


def test_the_proxy_path_records_nothing_for_tuning(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_proxy_then_train(objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=3, seed=0)
    records = objective.ledger.training.records()
    assert [r.run_id for r in records] == ["eval-0000-final"]
    sigma = result.settings["final_noise_multiplier"]
    assert records[0].event == DPSGDRun(sigma, 1 / 8, 8)
    assert objective.ledger.training.epsilon(DELTA) <= EPS
    assert "no private data" in result.guarantee_report()
    # the centre of the space and the three random points, 3 proxy trainings each, the 3 best 3 more times
    # each (methods.proxy_search), then the one final run
    assert result.settings["search"]["proxy_trainings"] == 4 * 3 + 3 * 3
    assert len(objective.optimizer_calls) == 4 * 3 + 3 * 3 + 1
    assert objective.optimizer_calls[-1]["lr"] == pytest.approx(result.hyperparameters["lr"])


def _spy_trainings(monkeypatch):
    r"""Every DP-SGD training's (training features, noise seed, noise multiplier), in order."""
    from botorch_dp.objectives import torch_classifier

    seen, real = [], torch_classifier.train_planned_run

    def spy(model_fn, X, y, training, **kwargs):
        seen.append((X, kwargs["noise_seed"], kwargs["dp_sgd"].noise_multiplier))
        return real(model_fn, X, y, training, **kwargs)

    monkeypatch.setattr(torch_classifier, "train_planned_run", spy)
    return seen


def test_the_proxy_search_reads_no_private_record_before_the_one_final_run(objective, monkeypatch):
    seen = _spy_trainings(monkeypatch)
    proxy = _proxy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_proxy_then_train(
            objective, None, proxy, epsilon=EPS, delta=DELTA, tuner=2, seed=3, repeats=2, finalists=2
        )
    assert len(seen) == 3 * 2 + 2 * 2 + 1  # (centre + 2 random) x 2, 2 finalists x 2, the final run
    *search, final = seen
    assert all(torch.equal(X, proxy[0]) for X, _, _ in search)  # the proxy's public records only
    assert torch.equal(final[0], objective.data.X_train)  # the private records: the last training, once
    sigma = result.settings["final_noise_multiplier"]
    assert final[2] == sigma and all(s == pytest.approx(sigma * 80 / 160, rel=1e-12) for _, _, s in search)
    # every proxy training draws its own noise stream (seeded: public data), the private run OS entropy
    seeds = [noise_seed for _, noise_seed, _ in search]
    assert None not in seeds and len(set(seeds)) == len(seeds) and final[1] is None
    assert [r.run_id for r in objective.ledger.training.records()] == ["eval-0000-final"]


def test_the_proxy_search_is_reproducible_from_its_seed_and_fresh_without_one(objective, monkeypatch):
    seen = _spy_trainings(monkeypatch)
    for seed in (3, 3, 4, None):
        tune_on_proxy_then_train(
            objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=1, seed=seed, repeats=2, finalists=1
        )
    runs = [[s for _, s, _ in seen[j * 5 : j * 5 + 4]] for j in range(4)]  # 2 candidates x 2, no final round
    assert runs[0] == runs[1] and not set(runs[0]) & set(runs[2]) and runs[3] == [None] * 4


def test_the_public_defaults_are_candidates_and_win_when_they_are_best(objective):
    given = [{"lr": 0.2}, {"lr": 0.001}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_proxy_then_train(
            objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=[{"lr": 0.0011}], defaults=given, finalists=1
        )
    assert [c["lr"] for c in result.settings["configurations"]] == pytest.approx([0.2, 0.001, 0.0011])
    lrs = [c["lr"] for c in objective.optimizer_calls]
    assert lrs[:9] == pytest.approx([0.2] * 3 + [0.001] * 3 + [0.0011] * 3)  # 3 repeats each, defaults first
    assert result.hyperparameters["lr"] == pytest.approx(0.2)  # one epoch: the tiny steps learn nothing
    means = result.settings["search"]["screening_means"]
    assert means[0] < min(means[1:])
    centre = tune_on_proxy_then_train(objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=1, seed=0)
    assert centre.settings["configurations"][0]["lr"] == pytest.approx(math.sqrt(1e-3 * 1.0), rel=1e-9)


def test_a_proxy_that_shares_a_training_record_is_refused_before_anything_is_recorded(objective):
    Xp, yp, Xv, yv = _proxy()
    Xp[0], yp[0] = objective.data.X_train[3], objective.data.y_train[3]
    with pytest.raises(ValueError, match="proxy shares 1 training record"):
        tune_on_proxy_then_train(objective, None, (Xp, yp, Xv, yv), epsilon=EPS, delta=DELTA, tuner=2, seed=0)
    assert objective.ledger.training.records() == []


def test_the_split_is_stated_default_or_given(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=2, seed=0)
        given = tune_on_subsample(
            objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=2, seed=0, tuning_share=0.3
        )
    assert f"tau = {DEFAULT_TUNING_SHARE:g}" in default.split and "public default" in default.split
    assert "tau = 0.3" in given.split and "tau given by the caller" in given.split
    assert default.settings["plan"].tuning_share == DEFAULT_TUNING_SHARE
    assert "split: tuning share" in default.guarantee_report()


def test_the_split_is_stated_when_chosen_on_the_proxy(objective, quick_plans, monkeypatch):
    # the real simulation on a tiny proxy, quick plans (each real plan takes seconds): the statement, the settings,
    # the plan charged, and the choice is choose_tuning_share's with the same seed
    proxy, asked, real = _proxy_with_test(), [], ct.choose_tuning_share

    def spy(*args, **kwargs):
        asked.append((args, kwargs))
        assert objective.ledger.training.records() == []  # chosen before anything is charged
        asked.append(real(*args, **kwargs))
        return asked[-1]

    monkeypatch.setattr(ct, "choose_tuning_share", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, tuner=2, seed=4,
                                   proxy=proxy)  # fmt: skip
    (args, kwargs), (again, table) = asked
    assert args[:2] == (objective, proxy) and kwargs == dict(epsilon=EPS, delta=DELTA, subsample_fraction=0.5, seed=4)
    assert [c["lr"] for c in result.settings["configurations"]] == [
        pytest.approx(c["lr"]) for c in (objective.space.to_natural(t) for _, t in args[2])
    ]
    stated = result.settings["tuning_share"]
    assert stated == {"value": again, "chosen": "proxy", "proxy_losses": table}
    assert again == min(table, key=lambda t: table[t]) and list(table) == list(SHARE_GRID)
    plan = result.settings["plan"]
    assert plan == quick_plan(**{**quick_plans[-1], "tuning_share": again}) and plan.tuning_share == again
    assert f"tuning share tau = {again:g} of epsilon^2" in result.split
    assert f"tau chosen on the proxy: tau = {again:g} had the lowest simulated final loss" in result.split
    assert all(f"tau = {t:g}: {v:.4g}" in result.split for t, v in table.items())
    assert "chosen on the proxy" in result.guarantee_report()
    # the ledger: the phase and the final run of the chosen tau, composed exactly as stated (nothing for the choice)
    phase, final = (r.event for r in objective.ledger.training.records())
    assert np.array_equal(phase.rdp, plan.phase_rdp) and final == DPSGDRun(plan.final_noise_multiplier, 1 / 8, 8)
    assert objective.ledger.training.epsilon(DELTA) == pytest.approx(plan.total_epsilon, rel=1e-12)
    assert result.guarantee["training records"] == (plan.total_epsilon, DELTA)


def test_a_given_share_is_used_and_the_proxy_is_not_read(objective, quick_plans, monkeypatch):
    monkeypatch.setattr(ct, "choose_tuning_share", lambda *a, **k: pytest.fail("the proxy was read"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, tuner=2, seed=4,
                                   proxy=_proxy_with_test(), tuning_share=0.2)  # fmt: skip
    assert result.settings["tuning_share"] == {"value": 0.2, "chosen": "given", "proxy_losses": None}
    assert [kw["tuning_share"] for kw in quick_plans] == [0.2] and "tau given by the caller" in result.split


# ------------------------------------------------------------------ choose_tuning_share: the split chosen on a proxy


def quick_plan(**kw) -> SubsamplePlan:
    r"""A stand-in for ``plan_subsample_tuning`` (a real plan takes seconds): σ's that depend on τ (more τ, less noise
    on the trials and more on the final run: σ_t = 1/τ, σ_f = 1 + τ), and the phase curve and ε's computed from them,
    so a ledger charged by it states what the plan says (its total is not the ε asked for)."""
    return _quick_plan(tuple(sorted(kw.items())))


@functools.cache
def _quick_plan(items) -> SubsamplePlan:
    kw = dict(items)
    share, rate, steps = kw["tuning_share"], kw["sample_rate"], kw["steps"]
    trials, gamma, delta = kw["num_trials"], kw["subsample_fraction"], kw["delta"]
    sigma_t, sigma_f = 1.0 / share, 1.0 + share
    phase = subsample_phase_rdp(
        noise_multiplier=sigma_t, sample_rate=rate, steps=steps, num_trials=trials, subsample_fraction=gamma
    )
    final = np.asarray(compute_rdp(q=rate, noise_multiplier=sigma_f, steps=steps, orders=TRAINING_RDP_ORDERS))
    alone = trials * np.asarray(compute_rdp(q=rate, noise_multiplier=sigma_t, steps=steps, orders=TRAINING_RDP_ORDERS))

    def eps(curve):
        return rdp_curve_epsilon(curve, TRAINING_RDP_ORDERS, delta)[0]

    return SubsamplePlan(
        epsilon=kw["epsilon"], delta=delta, subsample_fraction=gamma, tuning_share=share, num_trials=trials,
        sample_rate=rate, steps=steps, trial_noise_multiplier=sigma_t, final_noise_multiplier=sigma_f,
        tuning_epsilon=eps(phase), tuning_epsilon_unamplified=eps(alone), final_epsilon=eps(final),
        total_epsilon=eps(phase + final), phase_rdp=tuple(float(v) for v in phase),
    )  # fmt: skip


@pytest.fixture
def quick_plans(monkeypatch):
    r"""``cheap_tuning``'s plans replaced by ``quick_plan``; the list of what each was asked."""
    asked = []

    def plan(**kw):
        asked.append(kw)
        return quick_plan(**kw)

    monkeypatch.setattr(ct, "plan_subsample_tuning", plan)
    return asked


def _proxy_with_test():
    r"""A PUBLIC proxy with a test split: 80 training records, 30 validation and 30 test users."""
    (Xp, yp), (Xv, yv), (Xs, ys) = _split(80, 5), _split(30, 6), _split(30, 7)
    return (Xp, yp, Xv, yv, Xs, ys)


CONFIGS: list[tuple[dict[str, Any], torch.Tensor]] = [
    ({}, torch.tensor([0.1], dtype=torch.float64)),
    ({}, torch.tensor([0.9], dtype=torch.float64)),
]


@pytest.mark.parametrize("winner", range(len(SHARE_GRID)))
def test_the_share_with_the_lowest_simulated_loss_is_chosen_and_every_share_sees_the_same_subset_and_seeds(
    objective, quick_plans, monkeypatch, winner
):
    # the simulation stubbed with known losses: each share of the grid is the right answer once
    losses = {t: 0.5 + 0.1 * ((j - winner) % len(SHARE_GRID)) for j, t in enumerate(SHARE_GRID)}
    seen = []

    def simulated(obj, proxy, configs, plan, rows, noise_seeds):
        seen.append((plan, rows, noise_seeds))
        return losses[plan.tuning_share]

    monkeypatch.setattr(ct, "simulated_share_loss", simulated)
    share, table = choose_tuning_share(
        objective, _proxy_with_test(), CONFIGS, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, seed=7
    )
    assert share == SHARE_GRID[winner] and table == losses and list(table) == list(SHARE_GRID)
    # each share planned at the private run's public shape: q = 1/8, 8 steps, K = 2 trials
    common = dict(epsilon=EPS, delta=DELTA, sample_rate=1 / 8, steps=8, num_trials=2, subsample_fraction=0.5)
    assert quick_plans == [{**common, "tuning_share": t} for t in SHARE_GRID]
    # paired: ONE subset of the proxy (80 records) and the same noise seeds for every share
    subset_seed, trials_seed, final_seed = share_streams(7)
    rows = draw_poisson_subset(80, 0.5, seed=subset_seed)
    assert [p.tuning_share for p, _, _ in seen] == list(SHARE_GRID)
    assert all(torch.equal(r, rows) and seeds == (trials_seed, final_seed) for _, r, seeds in seen)
    assert len({subset_seed, trials_seed, final_seed}) == 3 and share_streams(None) == (None, None, None)


def test_a_tie_goes_to_the_first_share_of_the_grid(objective, quick_plans, monkeypatch):
    losses = {0.05: 0.4, 0.1: 0.3, 0.2: 0.3, 0.3: 0.5}
    monkeypatch.setattr(ct, "simulated_share_loss", lambda *args: losses[args[3].tuning_share])
    share, _ = choose_tuning_share(
        objective, _proxy_with_test(), CONFIGS, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, seed=0
    )
    assert share == 0.1
    share, _ = choose_tuning_share(
        objective, _proxy_with_test(), CONFIGS, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, seed=0,
        grid=(0.3, 0.2, 0.1),
    )  # fmt: skip
    assert share == 0.2


def test_the_simulated_losses_are_a_brute_force_recomputation_with_the_same_seeds(objective, quick_plans):
    # the trials and the final run rebuilt by hand on the proxy: the constructor, the seeds of share_streams, σ's
    # scaled by m_proxy/m = 80/160, the private run's batches per epoch (k = 8); each share's loss must match exactly
    proxy, grid = _proxy_with_test(), (0.05, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        share, table = choose_tuning_share(
            objective, proxy, CONFIGS, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, seed=11, grid=grid
        )
        subset_seed, trials_seed, final_seed = share_streams(11)
        rows = draw_poisson_subset(80, 0.5, seed=subset_seed)
        Xp, yp, Xv, yv, Xs, ys = proxy
        training = dataclasses.replace(objective.training, batches_per_epoch=8)
        clip = objective.run_dp_sgd.max_grad_norm

        def on(data, sigma, seed):
            dp = DPSGDConfig(noise_multiplier=sigma * 80 / 160, max_grad_norm=clip)
            return TorchModelTuningObjective(
                data, objective.space, optimizer=objective.optimizer, training=training, dp_sgd=dp, noise_seed=seed
            )

        expected, chosen = {}, {}
        for tau in grid:
            plan = quick_plan(**{**quick_plans[0], "tuning_share": tau})
            trials = on((Xp[rows], yp[rows], Xv, yv, Xs, ys), plan.trial_noise_multiplier, trials_seed)
            means = [float(trials(theta.reshape(1, -1))[0].mean()) for _, theta in CONFIGS]
            chosen[tau] = best = int(np.argmin(means))
            final = on(proxy, plan.final_noise_multiplier, final_seed)
            expected[tau] = final.evaluate_non_private(CONFIGS[best][1])["test_loss"]
    assert table == pytest.approx(expected, rel=1e-12, abs=0)
    assert share == min(expected, key=lambda t: expected[t])
    assert len(set(expected.values())) == len(grid)  # the shares' σ's make a difference here


def _spy_objectives(monkeypatch):
    r"""Every ``TorchModelTuningObjective`` that trains or is evaluated, by every route (the object itself)."""
    used = []
    for name in ("__call__", "train", "evaluate_charged", "evaluate_non_private", "train_covered"):
        real = getattr(TorchModelTuningObjective, name)

        def spy(self, *args, _real=real, **kwargs):
            used.append(self)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(TorchModelTuningObjective, name, spy)
    return used


def test_the_choice_reads_only_the_proxy(objective, quick_plans, monkeypatch):
    used, seen = _spy_objectives(monkeypatch), _spy_trainings(monkeypatch)
    proxy = _proxy_with_test()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        choose_tuning_share(
            objective, proxy, CONFIGS, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, seed=3, grid=(0.1, 0.3)
        )
    assert len(seen) == 2 * (len(CONFIGS) + 1)  # per share: 2 trials and the final run
    assert used and objective not in used  # the private objective is never evaluated (its copies on the proxy are)
    private = objective.data.X_train
    for X, _, _ in seen:  # every training on the proxy's records, none on a private one
        assert bool((X[:, None, :] == proxy[0][None, :, :]).all(-1).any(1).all())
        assert not bool((X[:, None, :] == private[None, :, :]).all(-1).any())
    assert objective.ledger.training.records() == [] and objective.num_trainings == 0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"grid": ()}, "grid"),
        ({"grid": "0.1"}, "grid"),
        ({"grid": (0.1, 1.0)}, "grid"),
        ({"grid": (0.0, 0.1)}, "grid"),
        ({"grid": (0.1, 0.1)}, "grid"),
        ({"subsample_fraction": 1.5}, "subsample_fraction"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 2.0}, "delta"),
        ({"configs": []}, "configs"),
        ({"proxy": ("X",)}, "proxy"),
        ({"proxy": "shared"}, "proxy shares 1 training record"),
    ],
)
def test_choose_tuning_share_refuses_bad_input_by_name_before_anything_trains(objective, monkeypatch, kwargs, name):
    seen = _spy_trainings(monkeypatch)
    if kwargs.get("proxy") == "shared":
        Xp, yp, Xv, yv, Xs, ys = _proxy_with_test()
        Xp[0], yp[0] = objective.data.X_train[3], objective.data.y_train[3]
        kwargs = {"proxy": (Xp, yp, Xv, yv, Xs, ys)}
    args = {"proxy": _proxy_with_test(), "configs": CONFIGS, "epsilon": EPS, "delta": DELTA, "subsample_fraction": 0.5,
            **kwargs}  # fmt: skip
    with pytest.raises(ValueError, match=name):
        choose_tuning_share(objective, **args)
    assert seen == [] and objective.ledger.training.records() == []


def test_a_bad_proxy_is_refused_by_tune_on_subsample_before_anything_is_recorded(objective):
    with pytest.raises(ValueError, match="proxy"):
        tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, tuner=2, proxy=("X",))
    assert objective.ledger.training.records() == [] and objective.optimizer_calls == []


def test_the_split_chosen_on_the_proxy_composes_to_epsilon_with_the_real_plans(objective):
    # slow (tests/slow_tests.txt): the real plans of the four shares; the fast version above uses quick plans
    proxy = _proxy_with_test()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.5, tuner=2, seed=4,
                                   proxy=proxy)  # fmt: skip
    chosen = result.settings["tuning_share"]
    table = chosen["proxy_losses"]
    assert chosen["value"] == min(table, key=lambda t: table[t]) and list(table) == list(SHARE_GRID)
    plan = result.settings["plan"]
    real = plan_subsample_tuning(epsilon=EPS, delta=DELTA, sample_rate=1 / 8, steps=8, num_trials=2,
                                 subsample_fraction=0.5, tuning_share=chosen["value"])  # fmt: skip
    assert plan == real
    epsilon = objective.ledger.training.epsilon(DELTA)
    assert epsilon == pytest.approx(plan.total_epsilon, rel=1e-9) and 0.99 * EPS <= epsilon <= EPS
    assert result.guarantee["training records"] == (pytest.approx(epsilon, rel=1e-9), DELTA)


def test_protect_both_noises_the_scores_and_states_the_validation_guarantee(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(
            objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=2, seed=0, protect="both", score_mu=0.5
        )
    from botorch_dp.privacy.analysis.gdp import gdp_epsilon

    assert result.guarantee["validation users"] == (pytest.approx(gdp_epsilon(0.5, DELTA)), DELTA)
    assert objective.ledger.validation.epsilon(DELTA) == pytest.approx(gdp_epsilon(0.5, DELTA))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 2.0}, "delta"),
        ({"subsample_fraction": 1.5}, "subsample_fraction"),
        ({"subsample_fraction": 0.01}, "subsample_fraction"),
        ({"tuning_share": 0.0}, "tuning_share"),
        ({"tuner": 0}, "tuner"),
        ({"tuner": ["lr"]}, "tuner"),
        ({"protect": "validation"}, "protect"),
        ({"protect": "both"}, "score_mu"),
    ],
)
def test_bad_input_is_refused_by_name_before_anything_is_recorded(objective, kwargs, name):
    args = {"epsilon": EPS, "delta": DELTA, "subsample_fraction": 0.3, "tuner": 2, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=name):
        tune_on_subsample(objective, **args)
    assert objective.ledger.training.records() == []


def test_an_objective_without_dp_sgd_is_refused():
    (Xt, yt), (Xv, yv) = _split(40, 0), _split(10, 1)
    plain = TorchModelTuningObjective((Xt, yt, Xv, yv), SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)]))
    with pytest.raises(ValueError, match="objective must be a TorchModelTuningObjective built with dp_sgd"):
        tune_on_subsample(plain, epsilon=EPS, delta=DELTA)
    with pytest.raises(ValueError, match="objective"):
        tune_on_proxy_then_train(plain, None, _proxy(), epsilon=EPS, delta=DELTA)
    assert isinstance(plain.ledger, PrivacyLedger) and plain.ledger.training.records() == []
