r"""The ``Method`` protocol members ``tune`` picks by (issue 41, item 1; ``methods.protocol``): every built-in
method states ``runs_configurations`` (the enumerate procedure and the sampled strategy run over the
configurations themselves; the others are handed one objective) and answers ``with_max_trials``: a method with a
hidden number of trials pads its private run to it, one without returns itself, and ``None`` changes nothing.
The optional capabilities (``with_loss_clip``, ``with_checkpoint``) are declared by the methods that have them;
a method with ``run_private`` but without the members is refused by name, and what ``tune`` records of a
method's one release is said by the run (``MethodRun.result_is_record``)."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from botorch_dp.methods import EnumerateMethod, Method
from botorch_dp.methods.choice import MethodComparison, MethodScore, with_loss_clip
from botorch_dp.methods.dp_gibo import DPGIBOMethod
from botorch_dp.methods.dp_hypo import DPHyPOMethod
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
from botorch_dp.methods.protocol import METHOD_MEMBERS, MethodRun, Resumable, TakesLossClip, missing_members
from botorch_dp.methods.proxy_then_train import ProxyThenTrainMethod
from botorch_dp.methods.sampled import SampledMethod
from botorch_dp.methods.subsample_tuning import SubsampleTuningMethod
from botorch_dp.methods.training_selection import TrainingSelectionMethod
from botorch_dp.methods.untuned import UntunedMethod
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.optim.options import FixedClip
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from botorch_dp.tuning.method_runs import with_max_trials

SPACE = SearchSpace([Hyperparameter("x", 0.0, 1.0), Categorical("arm", ("a", "b"))])
CONFIGURATIONS = tuple(SPACE.configurations())
CONFIGS = (
    DPGIBOConfig(
        bounds=SPACE.bounds, privacy_mu=0.5, target_delta=1e-5, clip=FixedClip(1.0), kernel=SPACE.recommended_kernel()
    ),
) * 2


def _methods():
    r"""Every built-in method, and whether it has a hidden number of trials (``max_trials`` pads it)."""
    return {
        "dp_gibo": (DPGIBOMethod(), False),
        "private_random_search": (PrivateRandomSearchMethod(mean_trials=3.0, loss_clip=1.0), True),
        "dp_hypo": (DPHyPOMethod(mean_trials=3.0, loss_clip=1.0), True),
        "enumerate": (EnumerateMethod(CONFIGURATIONS, CONFIGS, 0.3, 1.0, 0.8), False),
        "sampled": (SampledMethod(CONFIGURATIONS, CONFIGS, 2.0, 1e-5, 3.0, 0.1, 1.0), True),
        "training_selection": (TrainingSelectionMethod(SPACE, 3.0, 1e-5, 3.0), True),
        "subsample_tuning": (SubsampleTuningMethod(SPACE, 3.0, 1e-5), False),
        "proxy_then_train": (ProxyThenTrainMethod(SPACE, 3.0, 1e-5, None), False),
        "untuned": (UntunedMethod(SPACE, 3.0, 1e-5), False),
    }


RUNS_CONFIGURATIONS = {"enumerate", "sampled"}


@pytest.mark.parametrize("name", list(_methods()))
def test_each_built_in_method_states_the_members_tune_picks_by(name):
    method, hidden = _methods()[name]
    assert isinstance(method, Method)
    assert method.runs_configurations is (name in RUNS_CONFIGURATIONS)
    padded = method.with_max_trials(7)
    assert type(padded) is type(method) and with_max_trials(method, None) is method
    if hidden:  # the same method, its private run padded to 7 trials
        assert padded is not method and padded.max_trials == 7 and method.max_trials is None
        assert {k: v for k, v in vars(padded).items() if k != "max_trials"} == {
            k: v for k, v in vars(method).items() if k != "max_trials"
        }
        assert with_max_trials(method, 7) == padded
    else:
        assert padded is method and with_max_trials(method, 7) is method


# The optional capabilities (``TakesLossClip``, ``Resumable``): declared by the methods that have them, so tune
# asks a method for them by member, never by its type.
TAKES_LOSS_CLIP = {"private_random_search", "dp_hypo"}
RESUMABLE = {"enumerate"}


@pytest.mark.parametrize("name", list(_methods()))
def test_each_built_in_method_declares_its_loss_clip_and_checkpoint_capabilities(name):
    method, _ = _methods()[name]
    assert isinstance(method, TakesLossClip) is (name in TAKES_LOSS_CLIP)
    assert isinstance(method, Resumable) is (name in RESUMABLE)
    if name in TAKES_LOSS_CLIP:  # a given C is kept; an open one is set, nothing else changes
        assert method.with_loss_clip(2.5) is method
        opened = dataclasses.replace(method, loss_clip=None)
        clipped = opened.with_loss_clip(2.5)
        assert type(clipped) is type(method) and clipped.loss_clip == 2.5 and opened.loss_clip is None
        assert clipped == dataclasses.replace(opened, loss_clip=2.5)
        assert with_loss_clip((opened, method), 2.5) == (clipped, method)
        assert with_loss_clip((opened,), None)[0] is opened
    else:  # no score clip to set: the method itself
        assert with_loss_clip((method,), 2.5)[0] is method
    if name in RESUMABLE:
        checkpoint = object()
        assert method.with_checkpoint(None) is method and method.checkpoint is None
        assert method.with_checkpoint(checkpoint) == dataclasses.replace(method, checkpoint=checkpoint)


def test_the_method_members_are_the_protocols():
    r"""``METHOD_MEMBERS`` is what ``isinstance(_, Method)`` checks: an object with exactly them is a ``Method``,
    without any one it is not, and ``missing_members`` names that one."""

    def holding(members):
        return type("Holder", (), {m: (lambda *a, **k: None) for m in members})()

    assert isinstance(holding(METHOD_MEMBERS), Method) and missing_members(holding(METHOD_MEMBERS)) == []
    for left_out in METHOD_MEMBERS:
        partial = holding([m for m in METHOD_MEMBERS if m != left_out])
        assert not isinstance(partial, Method) and missing_members(partial) == [left_out]


def test_the_configuration_run_holds_the_result_only_when_the_run_says_it_is_its_record():
    result = SimpleNamespace(release=SimpleNamespace(theta=torch.zeros(1)))
    kw = dict(method="m", theta=torch.zeros(1), result=result, run_id="r", num_users=3, epsilon=1.0, delta=1e-5)
    run = MethodRun(description="d", **kw)
    assert run.configuration_result is run  # a selection's winner, a training method's release, a user's run
    record = MethodRun(description="d", result_is_record=True, **kw)
    assert record.configuration_result is result  # DP-GIBO's DPGIBOResult


def _comparison(method):
    score = MethodScore(method.name, method, (0.5,), evaluations=1.0)
    return MethodComparison([score], 0, context=None)


def test_a_method_with_run_private_but_missing_members_is_refused_naming_them():
    class Partial:  # an older user method: no runs_configurations, no with_max_trials
        name = "partial"
        gdp_mu = None

        def resolved(self, proxy_objective, context):
            return self

        def simulate(self, proxy_objective, context, seed):
            return torch.zeros(1)

        def describe(self):
            return "partial"

        def run_private(self, objective, *, ledger, seed=None, progress=False, executor=None):
            raise AssertionError("must not run")

    with pytest.raises(ValueError, match=r"'partial'.*\['runs_configurations', 'with_max_trials'\]"):
        _comparison(Partial()).get("partial")

    simulated = type("Simulated", (), {k: getattr(Partial, k) for k in ("resolved", "simulate", "describe")})()
    simulated.name = "simulated"
    with pytest.raises(ValueError, match="simulated here only"):
        _comparison(simulated).get("simulated")
    complete = _methods()["dp_gibo"][0]
    assert _comparison(complete).get("dp_gibo") is complete
