"""tune(): the one call (issue 30, item 2, and 4a for categorical spaces): plain DP-GIBO for a
continuous space, one run per configuration plus a private choice by noisy scores otherwise, the
whole procedure charged to one ledger at exactly the target (ε, δ), natural units in and out."""

import json
import math
import warnings

import pytest
import torch
from scipy import stats
from torch import Tensor

from botorch_dp import DPGIBO, DPGIBOConfig, tune
from botorch_dp.privacy.analysis.gdp import gdp_epsilon, gdp_mu
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace
from botorch_dp.tuning.one_call import TUNE_DEFAULTS
from botorch_dp.utils import child_seeds

N = 300
FAST = dict(raw_samples=16, num_restarts=1, num_iterations=4)
_NOISE = torch.randn(N, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1


def _loss(c) -> torch.Tensor:
    base = (math.log10(c["lr"]) + 2.5) ** 2 + ((c.get("width", 64) - 64) / 64) ** 2
    return (0.2 * (base + (0.0 if c.get("optimizer", "adam") == "adam" else 1.0)) + _NOISE).clamp(min=0)


def objective(configs):
    return torch.stack([_loss(c) for c in configs])


MIXED = SearchSpace(
    [
        Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
        Integer("width", 16, 128),
        Categorical("optimizer", ("sgd", "adam")),
    ]
)


def _tune(space, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tune(
            objective,
            space,
            # DP-GIBO (per configuration) is what this module tests; the default's rule: test_default_rule_picks_...
            **{"epsilon": 3.0, "delta": 1e-5, "seed": 7, "progress": False, "method": "dp_gibo", **FAST, **kw},
        )


def test_a_continuous_space_is_plain_dp_gibo_at_the_target():
    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True)])
    result = _tune(space)
    config = DPGIBOConfig(
        bounds=space.bounds,
        kernel=space.recommended_kernel(),
        privacy_mu=gdp_mu(3.0, 1e-5),
        target_delta=1e-5,
        seed=child_seeds([7], 2)[0],
        **{**TUNE_DEFAULTS, **FAST},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = DPGIBO(config).run(lambda X: objective(space.to_natural(X)), progress=False).release
    assert torch.equal(result.runs[0].result.release.theta, plain.theta) and result.chosen == 0
    assert result.hyperparameters == space.to_natural(plain.theta)
    assert result.guarantee.epsilon == pytest.approx(3.0, rel=1e-9) and result.runs[0].noisy_score is None
    assert [r.key for r in result.ledger.validation.records()] == [f"step-{t:04d}" for t in range(4)]


def test_configurations_are_enumerated_and_chosen_privately_at_exactly_the_target():
    seen = []

    def recording(configs):
        seen.extend(configs)
        return objective(configs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(recording, MIXED, epsilon=3.0, delta=1e-5, seed=7, progress=False, method="dp_gibo", **FAST)
    mu = gdp_mu(3.0, 1e-5)
    assert result.guarantee.mu == pytest.approx(mu, rel=1e-12) and result.guarantee.epsilon == pytest.approx(
        3.0, rel=1e-9
    )
    assert result.ledger.validation.mu() == pytest.approx(mu, rel=1e-12)  # the runs and the choice, all of it
    assert [r.configuration for r in result.runs] == [{"optimizer": "sgd"}, {"optimizer": "adam"}]
    run_mu = mu * math.sqrt(0.9 / 2)
    assert all(result.ledger.validation.mu(r.run_id) == pytest.approx(run_mu, rel=1e-12) for r in result.runs)
    scores = [r.noisy_score for r in result.runs]
    assert result.chosen == scores.index(min(scores))  # the choice is the lowest released score
    h = result.hyperparameters
    assert list(h) == ["lr", "width", "optimizer"] and type(h["lr"]) is float and type(h["width"]) is int
    assert h["optimizer"] == result.runs[result.chosen].configuration["optimizer"]
    # the objective only ever saw natural units: every name, ints for the integer, a choice for the categorical
    assert seen and all(
        set(c) == {"lr", "width", "optimizer"}
        and type(c["width"]) is int
        and 16 <= c["width"] <= 128
        and c["optimizer"] in ("sgd", "adam")
        and 1e-4 <= c["lr"] <= 1e-1
        for c in seen
    )
    assert "over 2 configuration(s)" in result.guarantee_report()
    assert '"optimizer"' in result.to_json() and "seed" not in result.to_json()


def test_with_a_large_budget_the_better_configuration_wins():
    result = _tune(MIXED, epsilon=50.0)
    assert result.hyperparameters["optimizer"] == "adam"  # sgd's losses are 0.2 higher everywhere
    assert gdp_epsilon(result.guarantee.mu, 1e-5) == pytest.approx(50.0, rel=1e-9)


@pytest.mark.parametrize(
    "bad, match",
    [
        (
            lambda configs: objective(configs)[:, :5] if len(configs) == 1 else objective(configs),
            r"objective returned shape \(1, 5\) at the final point",
        ),
        (
            lambda configs: objective(configs) * (math.nan if len(configs) == 1 else 1.0),
            r"non-finite losses at the final",
        ),
    ],
)
def test_a_bad_objective_at_the_choice_releases_no_score(bad, match):
    ledger = PrivacyLedger()
    with warnings.catch_warnings(), pytest.raises(ValueError, match=match):
        warnings.simplefilter("ignore")
        tune(
            bad, MIXED, epsilon=3.0, delta=1e-5, seed=7, progress=False, ledger=ledger, batch_size=3, method="dp_gibo",
            **FAST,
        )  # fmt: skip
    assert not [r for r in ledger.validation.records() if r.key == "score"]


def test_settings_that_tune_owns_are_refused():
    with pytest.raises(ValueError, match=r"tune sets \['privacy_mu'\] itself"):
        tune(objective, MIXED, epsilon=1.0, delta=1e-5, privacy_mu=1.0)
    with pytest.raises(ValueError, match="space must be a SearchSpace"):
        tune(objective, [Hyperparameter("lr", 0.1, 1.0)], epsilon=1.0, delta=1e-5)


def test_with_a_public_proxy_each_configuration_is_planned_on_it_and_the_objective_only_runs():
    proxy_noise = torch.randn(80, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.1
    proxy_calls, private_rows = [], []

    def proxy(configs):
        proxy_calls.append(len(configs))
        return torch.stack([(_loss(c)[:80] - _NOISE[:80] + proxy_noise).clamp(min=0) for c in configs])

    def private(configs):
        private_rows.append(len(configs))
        return objective(configs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            private,
            MIXED,
            epsilon=3.0,
            delta=1e-5,
            seed=7,
            progress=False,
            proxy=proxy,
            plan_budget=None,
            num_users=N,
            method="dp_gibo",  # no method choice (tests/tuning/test_mixed_methods.py)
            plan_options=dict(clip_quantiles=(0.5, 0.9), step_sizes=(0.2,), num_repeats=1),
            **FAST,
        )
    assert proxy_calls and all(r.plan is not None for r in result.runs)
    for r in result.runs:  # the run used the plan's settings (and the procedure's seed stream)
        planned = r.plan.config
        assert (r.config.clip_bound, r.config.step_size, r.config.num_iterations) == (
            planned.clip_bound,
            planned.step_size,
            planned.num_iterations,
        )
        assert r.config.clip_bound in [t.clip_bound for t in r.plan.trials]
    # the sensitive objective answered only the runs' batches and the two final points
    assert sum(private_rows) == sum(sum(r.result.release.batch_sizes) for r in result.runs) + 2
    assert result.guarantee.mu == pytest.approx(gdp_mu(3.0, 1e-5), rel=1e-12)
    with pytest.raises(ValueError, match=r"num_users: planning on a proxy needs n"):
        tune(private, MIXED, epsilon=3.0, delta=1e-5, proxy=proxy)


@pytest.mark.parametrize("space", ["continuous", "mixed"])
def test_a_kernel_fit_that_fails_on_the_proxy_keeps_the_spaces_kernel_and_names_its_coordinates(space, monkeypatch):
    r"""Planning never stops on its own kernel fit (issue 39): each configuration's plan keeps
    ``space.recommended_kernel()`` and the warning names the length-scales by the space's names."""
    import botorch.fit
    from botorch.exceptions.errors import ModelFittingError

    from botorch_dp.plan import KernelFitWarning

    def failing_fit(*args, **kwargs):
        raise ModelFittingError("All attempts to fit the model have failed.")

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", failing_fit)
    chosen = MIXED if space == "mixed" else SearchSpace([h for h in MIXED.hyperparameters if h.name != "optimizer"])

    def proxy(configs):
        return torch.stack([_loss(c)[:80] for c in configs])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tune(
            objective,
            chosen,
            epsilon=3.0,
            delta=1e-5,
            seed=7,
            progress=False,
            proxy=proxy,
            plan_budget=None,
            num_users=N,
            method="dp_gibo",
            plan_options=dict(clip_quantiles=(0.5,), step_sizes=(0.2,), num_repeats=1),
            **FAST,
        )
    messages = {str(w.message) for w in caught if issubclass(w.category, KernelFitWarning)}
    assert len(messages) == 1  # the same words for every configuration: shown once by default filters
    message = messages.pop()
    assert "failed (ModelFittingError)" in message and "lengthscale = lr 0.2, width 0.2;" in message
    default = chosen.recommended_kernel().state_dict()
    for r in result.runs:
        assert r.plan.kernel_fit.failure.startswith("ModelFittingError")
        assert all(torch.equal(v, default[k]) for k, v in r.config.kernel.state_dict().items())


def test_the_sampled_strategy_charges_one_papernot_steinke_curve_before_any_trial_and_releases_the_winner():
    from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon, private_selection_epsilon
    from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS

    ledger = PrivacyLedger()
    records_at_first_call = []

    def watched(configs):
        if not records_at_first_call:
            records_at_first_call.append([r.key for r in ledger.validation.records()])
        return objective(configs)

    space = SearchSpace(
        [
            Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
            Categorical("optimizer", ["sgd", "adam", "rmsprop", "adagrad"]),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            watched,
            space,
            epsilon=3.0,
            delta=1e-5,
            seed=3,
            progress=False,
            ledger=ledger,
            strategy="sample",
            mean_trials=4.0,
            **FAST,
        )
    assert records_at_first_call == [["sample"]]  # the whole selection was charged before the first trial
    assert [r.key for r in ledger.validation.records()] == ["sample"]  # the trials' releases are inside it
    # calibrated on the ledger's grid of orders: the ledger's own statement is within the target too
    mu0 = per_trial_mu_for_epsilon(
        target_epsilon=3.0,
        target_delta=1e-5,
        mean_trials=4.0,
        distribution="truncated_negative_binomial",
        orders=TRAINING_RDP_ORDERS,
    )
    assert result.score_mu == pytest.approx(mu0 * math.sqrt(0.1), rel=1e-12)
    expected = private_selection_epsilon(
        per_trial_mu=mu0, mean_trials=4.0, target_delta=1e-5, distribution="truncated_negative_binomial"
    )
    assert result.guarantee.epsilon == pytest.approx(expected, rel=1e-9) and result.guarantee.epsilon <= 3.0
    assert ledger.report(1e-5)["validation"]["epsilon"] <= 3.0
    assert math.isnan(result.guarantee.mu) and "Papernot–Steinke" in result.guarantee_report()
    assert len(result.runs) == 1 and result.chosen == 0  # the winner only: K and the other trials stay hidden
    assert result.hyperparameters["optimizer"] == result.runs[0].configuration["optimizer"]
    assert '"mu": null' in result.to_json()
    with pytest.raises(ValueError, match=r"strategy must be one of \('enumerate', 'sample'\)"):
        tune(objective, space, epsilon=1.0, delta=1e-5, strategy="random")


@pytest.mark.parametrize(
    "space, strategy",
    [
        (SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True)]), "enumerate"),
        (MIXED, "enumerate"),
        (MIXED, "sample"),
    ],
    ids=["continuous", "enumerate", "sample"],
)
def test_the_sensitive_fitting_opt_out_is_stated_as_no_guarantee_everywhere(space, strategy):
    # issue 40, item 5: every run says mu = inf and holds=False; the result, its report, its JSON and the
    # ledger's statement say there is no guarantee, never an (epsilon, delta)-DP
    result = _tune(
        space,
        strategy=strategy,
        mean_trials=2.0,
        num_iterations=2,
        unsafe_allow_sensitive_fitting=True,
        hyperparameter_fit=lambda kernel, X, y: None,
    )
    assert result.guarantee.holds is False and result.guarantee.epsilon == math.inf
    assert result.statement.holds is False and result.statement.validation.epsilon == math.inf
    report = result.guarantee_report()
    assert report.startswith("tune: NO differential-privacy guarantee") and ")-DP" not in report
    written = json.loads(result.to_json())
    assert written["guarantee"]["holds"] is False and written["guarantee"]["epsilon"] == "inf"
    assert written["statement"]["holds"] is False and written["statement"]["validation"]["epsilon"] == "inf"
    assert all(r.result.release.guarantee.holds is False for r in result.runs)
    # the same call without the opt-out states its (epsilon, delta)
    safe = _tune(space, strategy=strategy, mean_trials=2.0, num_iterations=2)
    assert safe.guarantee.holds and safe.statement.holds and ")-DP" in safe.guarantee_report()
    assert json.loads(safe.to_json())["guarantee"]["holds"] is True


# ------------------------------------------------------------------ issue 40, item 6: the released bits
WIDE = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Categorical("arm", tuple(range(8)))])
_USERS = torch.linspace(-0.5, 0.5, 50, dtype=torch.float64)
ONE = {**FAST, "num_iterations": 1, "batch_size": 2, "progress": False, "method": "dp_gibo"}


def _arm_losses(configs):
    r"""``q x 50`` losses in ``[0, 3]``-clip range and beyond: each arm its own level, the users spread."""
    rows = [1.0 + 0.1 * c.get("arm", 0) + (math.log10(c["lr"]) + 2.5) ** 2 + _USERS for c in configs]
    return torch.stack(rows)


@pytest.mark.privacy_fast
def test_tunes_released_scores_carry_gaussian_noise_of_the_stated_scale():
    # each configuration's score is its run's clipped mean loss plus N(0, sigma^2), sigma = C/(n mu_score),
    # mu_score = mu sqrt(f/K) (the module's split): (score - clipped mean)/sigma over 3 seeded calls x 8
    # configurations is 24 standard normals, so their sum of squares is chi-square(24)
    epsilon, delta, share, clip, K = 3.0, 1e-5, 0.1, 3.0, 8
    sigma = clip / (50 * gdp_mu(epsilon, delta) * math.sqrt(share / K))
    z = []
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # a seed: reproducible on purpose
            result = tune(_arm_losses, WIDE, epsilon=epsilon, delta=delta, seed=seed, selection_share=share, **ONE)
        z.extend(_score_noise(r) / sigma for r in result.runs)
    assert len(z) == 24
    chi2 = float(sum(v * v for v in z))
    assert stats.chi2.ppf(1e-4, 24) < chi2 < stats.chi2.ppf(1 - 1e-4, 24), chi2
    assert abs(sum(z)) / math.sqrt(24) < 4.0  # centred on the clipped mean


def _score_noise(run) -> float:
    r"""A run's released score minus its clipped mean loss (clip 3) at the released point."""
    at = WIDE.to_natural(run.result.release.theta.reshape(1, -1), choice=run.configuration)
    return run.noisy_score - float(_arm_losses(at).clamp(0.0, 3.0).mean())


def _gradient_noise(run) -> Tensor:
    r"""The noise of a run's released gradients (NON-PRIVATE diagnostics, recorded for the test)."""
    return run.result.release.released_gradients - run.result.diagnostics.unnoised_gradients


@pytest.mark.privacy_fast
def test_two_calls_without_a_seed_draw_different_noise():
    # the default noise is OS entropy: the noise of the scores and of every gradient release differs
    # between two unseeded calls (the noise itself, not only the released values, which also move with
    # the public random batch points)
    continuous = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True)])
    kw = dict(epsilon=3.0, delta=1e-5, record_non_private_diagnostics=True, **ONE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default never warns about a seed
        a, b = (tune(_arm_losses, WIDE, **kw) for _ in range(2))
        c, d = (tune(_arm_losses, continuous, **kw) for _ in range(2))
    for ra, rb in zip(a.runs, b.runs, strict=True):
        assert abs(_score_noise(ra) - _score_noise(rb)) > 1e-9
        assert not torch.allclose(_gradient_noise(ra), _gradient_noise(rb))
    assert not torch.allclose(_gradient_noise(c.runs[0]), _gradient_noise(d.runs[0]))
