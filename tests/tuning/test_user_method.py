r"""``tune`` uses a method through the ``Method`` protocol only (issue 41, item 1): a method written by a user,
which subclasses none of the library's, given in ``plan_options["methods"]`` with a proxy and recommended there,
runs through ``tune``'s path: its ``with_max_trials`` receives ``tune``'s ``max_trials``, its
``runs_configurations`` says how ``tune`` seeds it and wraps its release, and its run is charged and released
as a built-in one's. Its optional capabilities are asked by member: ``with_loss_clip`` receives ``tune``'s
``loss_clip`` (a method without it keeps its own ``C``), ``with_checkpoint`` the checkpoint (a method without it is
refused by name); one with ``run_private`` but without the members ``tune`` picks by is refused naming them, before
the private objective is called."""

import dataclasses
import warnings

import pytest
import torch

from botorch_dp import tune
from botorch_dp.methods.choice import with_loss_clip
from botorch_dp.methods.dp_gibo import DPGIBOMethod
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
from botorch_dp.methods.protocol import Method, MethodContext, MethodRun, Resumable, TakesLossClip
from botorch_dp.optim import DPGIBOConfig, DPGIBOResult
from botorch_dp.optim.options import FixedClip
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.tuning import Hyperparameter, SearchSpace
from botorch_dp.tuning.method_runs import OnSpace
from botorch_dp.utils import child_seeds

SPACE = SearchSpace([Hyperparameter("x", 0.0, 1.0), Hyperparameter("y", 0.0, 1.0)])
FAST = dict(raw_samples=8, num_restarts=1, acqf_maxiter=10, num_iterations=2, batch_size=2)


class Mine:
    r"""A user's method: private random search at E[K] = 3 under its own name, noting what tune asks of it."""

    name = "mine"

    def __init__(self, inner=None, log=None):
        self.inner = PrivateRandomSearchMethod(mean_trials=3.0, loss_clip=1.0) if inner is None else inner
        self.log = [] if log is None else log

    @property
    def gdp_mu(self):
        return self.inner.gdp_mu

    @property
    def runs_configurations(self):
        return False

    def with_max_trials(self, max_trials):
        self.log.append(("with_max_trials", max_trials))
        return Mine(self.inner.with_max_trials(max_trials), self.log)

    def resolved(self, proxy_objective, context):
        return Mine(self.inner.resolved(proxy_objective, context), self.log)

    def simulate(self, proxy_objective, context, seed):
        return self.inner.simulate(proxy_objective, context, seed)

    def describe(self):
        return f"mine: {self.inner.describe()}"

    def run_private(self, objective, *, ledger, seed=None, progress=False, executor=None):
        self.log.append(("run_private", seed, self.inner.max_trials))
        run = self.inner.run_private(objective, ledger=ledger, seed=seed, progress=progress, executor=executor)
        return dataclasses.replace(run, method=self.name)


def _objective(n, seed, rows):
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([0.7, 0.3], dtype=torch.float64) + 0.02 * torch.randn(n, 2, generator=g, dtype=torch.float64)

    def objective(configs):
        rows.append(len(configs))
        X = torch.tensor([[c["x"], c["y"]] for c in configs], dtype=torch.float64)
        return 1 - torch.exp(-(X[:, None, :] - centres[None]).pow(2).sum(-1) / (2 * 0.2**2))

    return objective


def test_a_users_method_runs_through_tunes_path_by_its_protocol_members():
    mine = Mine()
    assert isinstance(mine, Method) and not isinstance(mine, PrivateRandomSearchMethod)
    private_rows, proxy_rows = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            _objective(500, 1, private_rows),
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            seed=3,
            max_trials=6,
            progress=False,
            proxy=_objective(100, 0, proxy_rows),
            plan_budget=None,
            num_users=500,
            plan_options=dict(
                fit_kernel=False, clip_quantiles=(0.9,), step_sizes=(0.1,), num_repeats=1, methods=(mine,)
            ),
            **FAST,
        )
    assert result.method == "mine" and result.runs[0].plan.methods.recommended_name == "mine"
    # tune asked the method itself to pad its run, and handed it its child seed (runs_configurations is False)
    assert ("with_max_trials", 6) in mine.log
    assert mine.log[-1] == ("run_private", child_seeds([3], 1)[0], 6)
    assert sum(private_rows) >= 6  # the padded run: at least max_trials trials, one evaluation each
    # tune wrapped its one release as a built-in selection's, charged once at the full budget
    (released,) = result.runs
    assert result.hyperparameters == SPACE.to_natural(released.result.theta)
    assert released.noisy_score == released.result.released_score is not None
    assert len(result.ledger.validation.records()) == 1
    assert result.ledger.validation.epsilon(1e-5) == pytest.approx(1.0, rel=1e-6)


class Clipped(Mine):
    r"""A user's method whose score clip is open: tune's ``loss_clip`` sets it through ``with_loss_clip``."""

    name = "clipped"

    def __init__(self, inner=None, log=None):
        inner = PrivateRandomSearchMethod(mean_trials=3.0) if inner is None else inner
        super().__init__(inner, log)

    def with_loss_clip(self, loss_clip):
        self.log.append(("with_loss_clip", loss_clip))
        return Clipped(self.inner.with_loss_clip(loss_clip), self.log)

    def with_max_trials(self, max_trials):
        return Clipped(self.inner.with_max_trials(max_trials), self.log)

    def resolved(self, proxy_objective, context):
        return Clipped(self.inner.resolved(proxy_objective, context), self.log)

    def run_private(self, objective, *, ledger, seed=None, progress=False, executor=None):
        self.log.append(("run_private", self.inner.loss_clip))
        run = self.inner.run_private(objective, ledger=ledger, seed=seed, progress=progress, executor=executor)
        return dataclasses.replace(run, method=self.name)


class Partial:
    r"""An older user method: ``run_private`` but neither ``runs_configurations`` nor ``with_max_trials``."""

    name = "partial"
    gdp_mu = None

    def __init__(self, inner=None):
        self.inner = PrivateRandomSearchMethod(mean_trials=3.0, loss_clip=1.0) if inner is None else inner

    def resolved(self, proxy_objective, context):
        return Partial(self.inner.resolved(proxy_objective, context))

    def simulate(self, proxy_objective, context, seed):
        return self.inner.simulate(proxy_objective, context, seed)

    def describe(self):
        return "partial"

    def run_private(self, objective, *, ledger, seed=None, progress=False, executor=None):
        raise AssertionError("tune must refuse it before its private run")


def _tune(methods, private_rows, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tune(
            _objective(500, 1, private_rows),
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            seed=3,
            progress=False,
            proxy=_objective(100, 0, []),
            plan_budget=None,
            num_users=500,
            plan_options=dict(
                fit_kernel=False, clip_quantiles=(0.9,), step_sizes=(0.1,), num_repeats=1, methods=methods
            ),
            **FAST,
            **kw,
        )


def test_tunes_loss_clip_reaches_a_users_method_through_its_with_loss_clip():
    clipped = Clipped()
    assert isinstance(clipped, TakesLossClip) and not isinstance(Mine(), TakesLossClip)
    result = _tune((clipped,), [], loss_clip=0.75)
    assert result.method == "clipped"
    assert ("with_loss_clip", 0.75) in clipped.log and clipped.log[-1] == ("run_private", 0.75)
    # a method without the member keeps its own C
    mine = Mine()
    assert with_loss_clip((mine,), 0.75)[0] is mine and mine.inner.loss_clip == 1.0


def test_a_users_method_missing_members_is_refused_naming_them_before_its_private_run():
    private_rows = []
    with pytest.raises(ValueError, match=r"'partial'.*\['runs_configurations', 'with_max_trials'\]"):
        _tune((Partial(),), private_rows)
    assert private_rows == []  # the sensitive objective was never called


class Resuming(Mine):
    r"""A user's method that can resume: ``with_checkpoint`` notes the checkpoint it was given."""

    name = "resuming"

    def with_checkpoint(self, checkpoint):
        self.log.append(("with_checkpoint", checkpoint))
        return Resuming(self.inner, self.log)


def test_a_checkpoint_is_asked_of_the_method_and_refused_by_name_when_it_cannot_take_one():
    config = DPGIBOConfig(
        bounds=SPACE.bounds, privacy_mu=0.5, target_delta=1e-5, clip=FixedClip(1.0), kernel=SPACE.recommended_kernel()
    )
    checkpoint = object()
    resuming = OnSpace(Resuming(), SPACE, config)
    assert isinstance(resuming.method, Resumable) and resuming.with_checkpoint(None) is resuming
    resumed = resuming.with_checkpoint(checkpoint)
    assert isinstance(resumed.method, Resuming) and resumed.method is not resuming.method
    assert resuming.method.log == [("with_checkpoint", checkpoint)]
    plain = OnSpace(Mine(), SPACE, config)
    assert plain.with_checkpoint(None) is plain
    with pytest.raises(ValueError, match=r"checkpoint_dir: method 'mine' \(Mine\) cannot resume"):
        plain.with_checkpoint(checkpoint)


def test_tune_records_dp_gibos_own_result_and_a_users_run_as_the_run_says():
    r"""``OnSpace`` wraps one release as the run says (``MethodRun.result_is_record``), not by the result's type:
    DP-GIBO's ``DPGIBOResult`` is held as an enumerate run's, a user's run (whatever its result) as itself."""
    config = DPGIBOConfig(
        bounds=SPACE.bounds,
        privacy_mu=1.0,
        target_delta=1e-5,
        clip=FixedClip(1.0),
        kernel=SPACE.recommended_kernel(),
        **FAST,
    )
    run = OnSpace(DPGIBOMethod(config), SPACE, config).run_private(
        _objective(50, 1, []), ledger=PrivacyLedger(), seed=0
    )
    assert run.result_is_record and isinstance(run.result, DPGIBOResult) and run.runs[0].result is run.result
    mine = OnSpace(Mine(PrivateRandomSearchMethod(mean_trials=2.0, loss_clip=1.0)), SPACE, config)
    context = MethodContext(SPACE.bounds, 50, None, 1.0, 1e-5, config, 2.0)
    mine = dataclasses.replace(mine, method=mine.method.resolved(None, context))
    released = mine.run_private(_objective(50, 1, []), ledger=PrivacyLedger(), seed=0)
    held = released.runs[0].result
    assert not released.result_is_record and isinstance(held, MethodRun) and held.theta is released.theta
