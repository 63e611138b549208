"""tune() with a TorchModelTuningObjective (issue 30, item 2): every named value, categorical ones
included, reaches the model or the optimizer of each configuration; every training of every
configuration is one charged DP-SGD run; the statement's composed guarantee recomputed with Opacus."""

import concurrent.futures
import pickle
import warnings

import numpy as np
import pytest
import torch
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
from torch import nn

from botorch_dp import DPGIBOConfig, tune
from botorch_dp.privacy.analysis.gdp import gdp_epsilon, gdp_mu
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace, TorchModelTuningObjective
from botorch_dp.tuning.one_call import TUNE_DEFAULTS

FAST = dict(raw_samples=16, num_restarts=1, num_iterations=2)
TRAINING = TrainingConfig(epochs=1, batch_size=10, seed=0)
SPACE = SearchSpace(
    [
        Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
        Integer("width", 2, 6),
        Categorical("activation", ["relu", "tanh"]),
        Categorical("momentum", [0.0, 0.5]),
    ]
)


def _data(m=40, n=30, p=4):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (m + n,), generator=g)
    X = torch.randn(m + n, p, generator=g, dtype=torch.float64) + 1.5 * y[:, None]
    return X[:m], y[:m], X[m:], y[m:]


class _Recorder:
    """A model factory and an optimizer factory that record what each training received."""

    def __init__(self):
        self.models, self.optimizers = [], []

    def model_fn(self, width, activation):
        self.models.append((width, activation))
        act = {"relu": nn.ReLU, "tanh": nn.Tanh}[activation]
        return nn.Sequential(nn.Linear(4, width), act(), nn.Linear(width, 2)).double()

    def optimizer(self, params, lr, momentum):
        self.optimizers.append((lr, momentum))
        return torch.optim.SGD(params, lr=lr, momentum=momentum)


def _objective(recorder, space=SPACE, **kw):
    return TorchModelTuningObjective(
        _data(), space, model_fn=recorder.model_fn, optimizer=recorder.optimizer, training=TRAINING, **kw
    )


def _tune(objective, space=SPACE, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tune(
            objective,
            space,
            **{"epsilon": 2.0, "delta": 1e-5, "seed": 3, "progress": False, "protect": "validation", **FAST, **kw},
        )


def _trainings(result):
    """The trainings the procedure ran: every evaluation of every run, and each run's scored final point."""
    return sum(r.result.release.evaluation_points.shape[0] for r in result.runs) + len(result.runs)


def test_each_configuration_routes_its_values_and_every_training_is_counted():
    recorder = _Recorder()
    objective = _objective(recorder)
    assert objective.routes == {"lr": "optimizer", "width": "model", "activation": "model", "momentum": "optimizer"}
    result = _tune(objective, method="dp_gibo")  # DP-GIBO per configuration, each training routed
    K = 4
    assert [r.configuration for r in result.runs] == SPACE.configurations() and len(result.runs) == K
    # one model and one optimizer per training, each with the values of the configuration it belongs to
    assert len(recorder.models) == len(recorder.optimizers) == _trainings(result) == objective.num_trainings
    # run k's evaluations in order, then each run's final point trained once more for its score
    sizes = [r.result.release.evaluation_points.shape[0] for r in result.runs]
    starts = np.cumsum([0] + sizes)
    for k, (r, a, b) in enumerate(zip(result.runs, starts[:-1], starts[1:], strict=True)):
        # the integer arrives rounded, the continuous value in its bounds, the categoricals of the run's configuration
        natural = SPACE.to_natural(r.result.release.evaluation_points, choice=r.configuration)
        assert [(c["width"], c["activation"]) for c in natural] == recorder.models[a:b]
        assert [(c["lr"], c["momentum"]) for c in natural] == recorder.optimizers[a:b]
        final = SPACE.to_natural(r.result.release.theta, choice=r.configuration)
        assert recorder.models[starts[-1] + k] == (final["width"], final["activation"])
        assert recorder.optimizers[starts[-1] + k] == (final["lr"], final["momentum"])
    assert all(type(w) is int and 2 <= w <= 6 for w, _ in recorder.models)
    assert all(type(lr) is float and 1e-3 <= lr <= 1e-1 for lr, _ in recorder.optimizers)
    h = result.hyperparameters
    assert list(h) == ["lr", "width", "activation", "momentum"] and type(h["width"]) is int
    assert {k: h[k] for k in ("activation", "momentum")} == result.runs[result.chosen].configuration
    # without DP-SGD: nothing on the training side (a new ledger held to μ), the validation side exactly at the target
    assert result.ledger.training.records() == [] and result.ledger.validation_mu_budget == gdp_mu(2.0, 1e-5)
    assert result.guarantee.mu == pytest.approx(gdp_mu(2.0, 1e-5), rel=1e-12)
    protected, unprotected = result.guarantee_report().split("What was NOT protected:")
    assert result.statement.training is None and "training records" not in protected
    assert "training records: NO guarantee" in unprotected


def test_dp_sgd_trainings_are_charged_one_run_each_and_the_composition_is_recomputed():
    recorder = _Recorder()
    objective = _objective(recorder, dp_sgd=DPSGDConfig(noise_multiplier=1.5, max_grad_norm=1.0))
    result = _tune(objective)
    trainings = _trainings(result)
    assert result.ledger is objective.ledger  # tune charges the ledger the objective records its runs in
    runs = objective.ledger.training.runs()
    assert len(runs) == trainings == len(recorder.models) == len(objective.runs) == objective.num_trainings
    # each run charged (σ, q, steps) of one epoch of 40 rows in batches of 10
    assert {(e.noise_multiplier, e.sample_rate, e.steps) for e in runs.values()} == {(1.5, 10 / 40, 4)}
    delta = 1e-5
    mu = gdp_mu(2.0, delta)
    s = result.statement
    assert s.validation.mu == pytest.approx(mu, rel=1e-12) and s.validation.epsilon == pytest.approx(2.0, rel=1e-9)
    orders = np.asarray(TRAINING_RDP_ORDERS)
    training_rdp = trainings * compute_rdp(q=0.25, noise_multiplier=1.5, steps=4, orders=orders)
    training_eps, _ = get_privacy_spent(orders=orders, rdp=training_rdp, delta=delta)
    composed_eps, _ = get_privacy_spent(orders=orders, rdp=training_rdp + orders * mu**2 / 2, delta=delta)
    assert s.training.epsilon == pytest.approx(training_eps, rel=1e-9)
    assert s.composed.epsilon == pytest.approx(composed_eps, rel=1e-9)
    report = result.guarantee_report()
    assert f"{trainings} DP-SGD run(s)" in report and "validation users" in report
    assert "if the same people are in both sets" in report
    assert gdp_epsilon(result.guarantee.mu, delta) == pytest.approx(2.0, rel=1e-9)


def test_a_bound_copy_shares_the_ledger_pickles_without_it_and_refuses_bad_choices():
    recorder = _Recorder()
    objective = _objective(recorder, dp_sgd=DPSGDConfig(noise_multiplier=1.5, max_grad_norm=1.0))
    bound = objective.with_choice({"activation": "tanh", "momentum": 0.5})
    assert bound.ledger is objective.ledger and bound.routes == objective.routes
    assert objective.space.configurations() != [{}] and bound.space.configurations() == [{}]
    bound(torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    assert recorder.models[-1][1] == "tanh" and recorder.optimizers[-1][1] == 0.5
    assert objective.num_trainings == bound.num_trainings == 1 and len(objective.ledger.training.runs()) == 1
    copy = pickle.loads(pickle.dumps(bound))
    assert copy.ledger is None and copy._bound_from is None
    with pytest.raises(ValueError, match="unknown choice 'gelu'"):
        objective.with_choice({"activation": "gelu"})
    with pytest.raises(ValueError, match="'dropout' is not a categorical hyperparameter"):
        objective.with_choice({"dropout": 0.1})


def test_bad_arguments_for_a_torch_objective_are_refused_by_name_before_anything_runs(tmp_path):
    recorder = _Recorder()
    objective = _objective(recorder, dp_sgd=DPSGDConfig(noise_multiplier=1.5, max_grad_norm=1.0))
    other = SearchSpace(
        [
            Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
            Integer("width", 2, 8),
            Categorical("activation", ["relu", "tanh"]),
            Categorical("momentum", [0.0, 0.5]),
        ]
    )
    with pytest.raises(ValueError, match=r"objective.space differs from space"):
        tune(objective, other, epsilon=1.0, delta=1e-5, progress=False)
    with pytest.raises(ValueError, match=r"ledger=.*records its training runs in objective.ledger"):
        tune(objective, SPACE, epsilon=1.0, delta=1e-5, ledger=PrivacyLedger(), progress=False)
    with pytest.raises(ValueError, match=r"strategy='sample' with an objective that charges DP training runs"):
        tune(objective, SPACE, epsilon=1.0, delta=1e-5, strategy="sample", protect="validation", progress=False)
    with pytest.raises(ValueError, match=r"executor must be a concurrent.futures.Executor"):
        tune(objective, SPACE, epsilon=1.0, delta=1e-5, executor=4, progress=False)
    with pytest.raises(ValueError, match=r"objective must be callable"):
        tune(42, SPACE, epsilon=1.0, delta=1e-5, progress=False)
    with pytest.raises(ValueError, match=r"checkpoint_dir must be a path"):
        tune(objective, SPACE, epsilon=1.0, delta=1e-5, checkpoint_dir=3, protect="validation", progress=False)
    assert recorder.models == [] and objective.ledger.records() == []


def test_a_torch_proxy_on_public_rows_plans_each_configuration_and_num_users_is_read_from_the_objective():
    recorder, public_recorder = _Recorder(), _Recorder()
    space = SPACE.with_choice({"momentum": 0.5})  # one categorical left free: two configurations
    objective = _objective(recorder, space)
    X, y, Xv, yv = _data()
    g = torch.Generator().manual_seed(1)
    public = (
        torch.randn(40, 4, generator=g, dtype=torch.float64) + 1.5 * y[:, None],
        y,
        torch.randn(30, 4, generator=g, dtype=torch.float64) + 1.5 * yv[:, None],
        yv,
    )
    proxy = objective.with_data(public, model_fn=public_recorder.model_fn, optimizer=public_recorder.optimizer)
    result = _tune(
        objective,
        space,
        proxy=proxy,
        plan_budget=None,
        method="dp_gibo",  # each configuration planned, no method choice (tests/tuning/test_mixed_methods.py)
        plan_options=dict(clip_quantiles=(0.9,), step_sizes=(0.2,), num_repeats=1, fit_kernel=False),
    )
    assert len(result.runs) == 2 and all(r.plan is not None for r in result.runs)
    for r in result.runs:  # each configuration was planned with its own categorical value, on public rows only
        assert (r.config.clip_bound, r.config.step_size) == (r.plan.config.clip_bound, r.plan.config.step_size)
    assert {a for _, a in public_recorder.models} == {"relu", "tanh"} and proxy.num_trainings > 0
    assert len(recorder.models) == objective.num_trainings == _trainings(result)
    assert all(m == 0.5 for _, m in recorder.optimizers + public_recorder.optimizers)


class _CountingPool(concurrent.futures.ThreadPoolExecutor):
    def __init__(self):
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_an_executor_trains_the_rows_and_the_caller_charges_them_as_in_a_serial_call():
    space = SPACE.with_choice({"momentum": 0.0})
    results = []
    for executor in (None, _CountingPool()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the explicit DP-SGD noise seed
            objective = _objective(_Recorder(), space, dp_sgd=DPSGDConfig(noise_multiplier=1.5), noise_seed=2)
        results.append((_tune(objective, space, executor=executor), executor))
    (serial, _), (pooled, pool) = results
    # every evaluated row went to the pool (the scores' final points are evaluated by tune itself)
    assert pool.submitted == sum(r.result.release.evaluation_points.shape[0] for r in pooled.runs) > 0
    for a, b in zip(serial.runs, pooled.runs, strict=True):
        assert torch.equal(a.result.release.theta, b.result.release.theta) and a.noisy_score == b.noisy_score
    assert [(r.run_id, r.event) for r in pooled.ledger.training.records()] == [
        (r.run_id, r.event) for r in serial.ledger.training.records()
    ]
    pool.shutdown()


def test_a_configurations_objective_pickles_for_a_process_pool():
    from botorch_dp.tuning.tune_result import ConfigsObjective

    wrapped = ConfigsObjective(_picklable_losses, SPACE, {"activation": "relu", "momentum": 0.5})
    X = torch.tensor([[0.2, 0.4], [0.9, 0.1]], dtype=torch.float64)
    assert torch.equal(pickle.loads(pickle.dumps(wrapped))(X), wrapped(X))
    assert wrapped(X)[:, 0].tolist() == [c["lr"] for c in SPACE.to_natural(X, choice=wrapped.choice)]


def _picklable_losses(configs):
    return torch.tensor([[c["lr"], float(c["width"])] for c in configs], dtype=torch.float64)


def test_a_dp_sgd_target_too_small_for_the_procedure_is_refused_before_anything_trains():
    recorder = _Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        objective = _objective(recorder, dp_sgd=DPSGDConfig(target_epsilon=3.0, target_delta=1e-5, planned_runs=10))
    # 4 configurations x T = 2 steps x b = d + 1 = 3 points, and 4 scored final points: 28 trainings
    config = DPGIBOConfig(
        bounds=SPACE.bounds, kernel=SPACE.recommended_kernel(), privacy_mu=1.0, **{**TUNE_DEFAULTS, **FAST}
    )
    assert 4 * config.max_evaluations + 4 == 28
    with pytest.raises(PrivacyBudgetExceeded, match=r"28 more DP-SGD run\(s\) .*planned_runs=10"):
        _tune(objective)
    assert recorder.models == [] and objective.ledger.records() == []
    objective.with_choice(SPACE.configurations()[0]).check_room(10)  # what the target was calibrated for passes
