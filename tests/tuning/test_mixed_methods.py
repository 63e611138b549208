r"""``tune(method=...)`` on a mixed space (``tuning.mixed_methods``): with a proxy, ``"auto"`` plans
every configuration, compares DP-GIBO per configuration with private random search over the
public encoding on the proxy, and runs the winner at the full (ε, δ) only after the last proxy
call; the recommendation follows the proxy (a bowl at θ₀ for DP-GIBO, a narrow basin far from
θ₀ for random search); forced selection methods work with and without a proxy; the objective
only ever sees natural-unit configurations."""

import math
import warnings

import pytest
import torch

from botorch_dp import tune
from botorch_dp.baselines import private_random_search
from botorch_dp.plan import DPGIBOMethod, DPHyPOMethod, PrivateRandomSearchMethod
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.analysis.private_selection import private_selection_epsilon
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace
from botorch_dp.tuning.encoding import MixedEncoding
from botorch_dp.utils import child_seeds

SPACE = SearchSpace([Hyperparameter("x", 0.0, 1.0), Hyperparameter("y", 0.0, 1.0), Categorical("c", ("a", "b"))])
OFFSET = {"a": 0.3, "b": 0.0}  # configuration "b" is the better one in both problems
FAST = dict(raw_samples=8, num_restarts=1, acqf_maxiter=10)
SETTINGS = dict(
    num_iterations=4,
    batch_size=3,
    step_size=0.1,
    search_radius=0.05,
    theta0=torch.full((2,), 0.15, dtype=torch.float64),
    **FAST,
)
PLAN = dict(fit_kernel=False, clip_quantiles=(0.9,), step_sizes=(0.1,), num_repeats=3)


def _problem(kind, n, seed, log, label):
    r"""``bowl``: ``5‖θ − c_i‖²`` with ``c_i`` near θ₀ = (0.15, 0.15), where DP-GIBO starts at the
    optimum; ``basin``: ``1 − exp(−‖θ − c_i‖²/(2 · 0.2²))`` with ``c_i`` near (0.7, 0.7), flat at θ₀,
    where uniform points land in the basin often. Each plus the configuration's offset."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.tensor([0.15, 0.15] if kind == "bowl" else [0.7, 0.7], dtype=torch.float64)
    c = centre + 0.02 * torch.randn(n, 2, generator=g, dtype=torch.float64)

    def objective(configs):
        log.append((label, [dict(h) for h in configs]))
        X = torch.tensor([[h["x"], h["y"]] for h in configs], dtype=torch.float64)
        r2 = (X[:, None, :] - c[None]).pow(2).sum(-1)
        offset = torch.tensor([OFFSET[h["c"]] for h in configs], dtype=torch.float64)[:, None]
        return offset + (5 * r2 if kind == "bowl" else 1 - torch.exp(-r2 / (2 * 0.2**2)))

    return objective


def _gdp_delta(mu, epsilon):
    r"""δ(ε) of μ-GDP, Dong, Roth & Su (2022), Cor. 2.13, with ``math.erf``."""
    phi = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    return phi(-epsilon / mu + mu / 2) - math.exp(epsilon) * phi(-epsilon / mu - mu / 2)


@pytest.mark.parametrize(("kind", "expected"), [("bowl", "dp_gibo"), ("basin", "private_random_search")])
def test_auto_on_a_mixed_space_runs_what_the_proxy_recommends_after_the_last_proxy_call(kind, expected):
    log = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            _problem(kind, 2000, 1, log, "private"),
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            seed=0,
            progress=False,
            proxy=_problem(kind, 200, 0, log, "proxy"),
            plan_budget=None,
            num_users=2000,
            plan_options=dict(PLAN, methods=(DPGIBOMethod(), PrivateRandomSearchMethod())),
            **SETTINGS,
        )
    table = result.methods
    assert table.recommended_name == result.method == expected
    assert [s.name for s in table.scores] == ["dp_gibo", "private_random_search"]
    assert all(w == 3 for w, _, _ in [table.paired(i) for i in range(2) if i != table.best])  # 3/3 paired wins
    assert table.context.bounds.shape == (2, 3)  # the encoded cube: x, y and one coordinate for c
    assert "recommended (*): " + expected in str(table)
    labels = [label for label, _ in log]
    first = labels.index("private")
    assert "proxy" in labels[:first] and "proxy" not in labels[first:]  # the comparison is over before
    assert result.hyperparameters["c"] == "b" and list(result.hyperparameters) == ["x", "y", "c"]
    if expected == "dp_gibo":  # the enumerate procedure with the plans the comparison simulated
        assert len(result.runs) == 2 and all(r.plan is not None for r in result.runs)
        for r, planned in zip(result.runs, table.scores[0].method.configs, strict=True):
            assert (r.config.clip_bound, r.config.step_size) == (planned.clip_bound, planned.step_size)
        mu = math.sqrt(sum(r.event.mu**2 for r in result.ledger.validation.records()))  # runs' steps and scores
        assert mu == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-9)
        assert _gdp_delta(mu, 1.0) == pytest.approx(1e-5, rel=1e-6)  # the ledger's ε is the target
        assert result.ledger.validation.epsilon(1e-5) == pytest.approx(1.0, rel=1e-9)
    else:  # one Papernot–Steinke curve over the encoded cube at the full budget
        run = result.runs[0].result
        details = run.result.guarantee.details
        assert len(result.ledger.validation.records()) == 1 and run.theta.shape == (2,)
        assert table.context.evaluations == details["mean_trials"] == 2 * (4 * 3) + 2  # K (T b + 1)
        recomputed = private_selection_epsilon(
            per_trial_mu=details["per_trial_mu"],
            mean_trials=26.0,
            target_delta=1e-5,
            distribution="truncated_negative_binomial",
        )
        assert recomputed == pytest.approx(1.0, rel=2e-3) and recomputed <= 1.0 + 1e-9
        assert result.ledger.validation.epsilon(1e-5) == pytest.approx(1.0, rel=1e-9)
        assert result.hyperparameters == SPACE.to_natural(run.theta, choice=result.runs[0].configuration)
    private = [h for label, configs in log if label == "private" for h in configs]
    assert all(set(h) == {"x", "y", "c"} and h["c"] in OFFSET and isinstance(h["x"], float) for h in private)


def test_forced_selections_on_a_mixed_space_see_natural_units_and_spend_the_target():
    space = SearchSpace(
        [
            Integer("w", 1, 9),
            Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
            Categorical("opt", ("sgd", "adam", "rmsprop")),
        ]
    )
    seen = []

    def objective(configs):
        seen.extend(configs)
        return torch.stack(
            [
                torch.full(
                    (500,), abs(c["w"] - 4) / 8 + (0.0 if c["opt"] == "adam" else 0.5) + abs(math.log10(c["lr"]) + 2)
                )
                for c in configs
            ]
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            objective,
            space,
            epsilon=2.0,
            delta=1e-5,
            seed=4,
            progress=False,
            method="private_random_search",
            num_iterations=3,
            loss_clip=2.0,
        )
    assert result.method == "private_random_search" and result.methods is None
    details = result.runs[0].result.result.guarantee.details
    assert details["mean_trials"] == 3 * (3 * 3 + 1)  # K (T (d + 1) + 1) without a proxy
    # the baseline over the encoding with tune's seed, its trials read through the NON-PRIVATE diagnostic:
    # the objective saw exactly its K trials, and the release is its winner
    calls = len(seen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoding = MixedEncoding(space)
        trials = private_random_search(
            encoding.objective(objective),
            encoding.bounds,
            mean_trials=30.0,
            per_trial_mu=details["per_trial_mu"],
            loss_clip=2.0,
            target_delta=1e-5,
            seed=child_seeds([4], 4)[0],
            non_private_trials=True,
        )
    assert calls == trials.num_evaluations and torch.equal(result.runs[0].result.result.theta, trials.theta)
    del seen[calls:]
    for c in seen:  # natural units: a rounded int in range, a float in range, a valid choice, in order
        assert list(c) == ["w", "lr", "opt"] and type(c["w"]) is int and 1 <= c["w"] <= 9
        assert isinstance(c["lr"], float) and 1e-3 <= c["lr"] <= 1e-1 and c["opt"] in ("sgd", "adam", "rmsprop")
    assert {c["opt"] for c in seen} == {"sgd", "adam", "rmsprop"}  # the encoding samples every choice
    recomputed = private_selection_epsilon(
        per_trial_mu=details["per_trial_mu"],
        mean_trials=30.0,
        target_delta=1e-5,
        distribution="truncated_negative_binomial",
    )
    assert result.guarantee.epsilon == pytest.approx(recomputed, rel=1e-9) and recomputed <= 2.0
    assert result.ledger.validation.epsilon(1e-5) == pytest.approx(2.0, rel=1e-9)
    assert result.hyperparameters in seen and "public encoding of 3 configurations" in result.guarantee_report()


def test_forced_dp_hypo_with_a_proxy_is_compared_there_and_run():
    log = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            _problem("basin", 500, 1, log, "private"),
            SPACE,
            epsilon=3.0,
            delta=1e-5,
            seed=0,
            progress=False,
            proxy=_problem("basin", 100, 0, log, "proxy"),
            plan_budget=None,
            num_users=500,
            method="dp_hypo",
            plan_options=dict(PLAN, num_repeats=1, methods=(DPGIBOMethod(), DPHyPOMethod(num_candidates=64))),
            **{**SETTINGS, "num_iterations": 2},
        )
    assert result.method == "dp_hypo" and [s.name for s in result.methods.scores] == ["dp_gibo", "dp_hypo"]
    labels = [label for label, _ in log]
    assert "proxy" not in labels[labels.index("private") :]
    assert result.ledger.validation.epsilon(1e-5) <= 3.0 * (1 + 1e-9) and "DP-HyPO" in result.guarantee_report()
    assert result.hyperparameters == MixedEncoding(SPACE).to_natural(
        MixedEncoding(SPACE).encode(result.runs[0].result.theta, result.runs[0].configuration)
    )


def test_the_choice_refuses_a_checkpoint_and_sample_keeps_dp_gibo(tmp_path):
    log = []
    proxy, private = _problem("bowl", 100, 0, log, "proxy"), _problem("bowl", 300, 1, log, "private")
    with pytest.raises(ValueError, match=r"method='auto' \(the planner's method choice .* is not checkpointed"):
        tune(
            private,
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            proxy=proxy,
            plan_budget=None,
            num_users=300,
            checkpoint_dir=tmp_path / "c",
            progress=False,
        )
    with pytest.raises(ValueError, match=r"method='dp_hypo' \(the planner's method choice or a selection method\)"):
        tune(private, SPACE, epsilon=1.0, delta=1e-5, method="dp_hypo", checkpoint_dir=tmp_path / "c", progress=False)
    assert log == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            private,
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            proxy=proxy,
            plan_budget=None,
            num_users=300,
            strategy="sample",
            mean_trials=1.5,
            seed=1,
            progress=False,
            plan_options=dict(PLAN, num_repeats=1),
            **{**SETTINGS, "num_iterations": 1},
        )
    assert result.method == "dp_gibo" and result.methods is None  # Papernot–Steinke over DP-GIBO runs, as before
