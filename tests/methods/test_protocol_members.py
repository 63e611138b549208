r"""The ``Method`` protocol members ``tune`` picks by (issue 41, item 1; ``methods.protocol``): every built-in
method states ``runs_configurations`` (the enumerate procedure and the sampled strategy run over the
configurations themselves; the others are handed one objective) and answers ``with_max_trials``: a method with a
hidden number of trials pads its private run to it, one without returns itself, and ``None`` changes nothing."""

import pytest

from botorch_dp.methods import EnumerateMethod, Method
from botorch_dp.methods.dp_gibo import DPGIBOMethod
from botorch_dp.methods.dp_hypo import DPHyPOMethod
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
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
