r"""``tune``'s private selections (issue 40, item 2): ``strategy="sample"`` and a forced private random
search keep their number of trials K and their losing trials hidden in what they return, print and
warn, name no trial in an error, write no checkpoint, and with ``max_trials`` evaluate the objective
a public number of times and release what the first K trials give."""

import io
import json
import warnings
from contextlib import redirect_stderr

import numpy as np
import pytest
import torch

from botorch_dp import tune
from botorch_dp.baselines import private_random_search
from botorch_dp.baselines.selection import HIDDEN_TRIAL_MESSAGE, PROGRESS_LABEL, HiddenTrialError
from botorch_dp.privacy.analysis.private_selection import sample_num_trials
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from botorch_dp.utils import child_seeds

pytestmark = pytest.mark.privacy_fast  # the fast version of privacy properties (tests/conftest.py)

N = 50
SPACE = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Categorical("opt", ["sgd", "adam", "rmsprop"])])
BOX = SearchSpace([Hyperparameter("x", 0.0, 1.0), Hyperparameter("y", 0.0, 1.0)])
TINY = dict(num_iterations=1, batch_size=2, raw_samples=8, num_restarts=1, acqf_maxiter=5)
_USERS = torch.linspace(-0.2, 0.2, N, dtype=torch.float64)


def losses(configs):
    rows = []
    for c in configs:
        if "lr" in c:
            base = (np.log10(c["lr"]) + 2.5) ** 2 / 4 + (0.0 if c["opt"] == "adam" else 0.3)
        else:
            base = (c["x"] - 0.7) ** 2 + (c["y"] - 0.3) ** 2
        rows.append((base + _USERS).clamp(min=0))
    return torch.stack(rows)


class Counted:
    def __init__(self, fail_at=None):
        self.rows, self.fail_at = [], fail_at

    def __call__(self, configs):
        self.rows.append(len(configs))
        if self.fail_at == len(self.rows):
            raise RuntimeError(f"failed at call {self.fail_at}")
        return losses(configs)


def _sample_K(seed, mean_trials=2.0):
    r"""The hidden K of ``tune(strategy="sample", seed=seed)``, drawn as it draws it (NON-PRIVATE, for the test)."""
    rng = np.random.default_rng([seed, 1])
    return sample_num_trials(distribution="truncated_negative_binomial", mean_trials=mean_trials, rng=rng)


def _seeds_with_K(values, mean_trials=2.0):
    found = {}
    for seed in range(50):
        found.setdefault(_sample_K(seed, mean_trials), seed)
    return [found[k] for k in values]


def _run(objective, space=SPACE, **kw):
    err = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, redirect_stderr(err):
        warnings.simplefilter("always")
        result = tune(objective, space, epsilon=3.0, delta=1e-5, **{**TINY, **kw})
    return result, err.getvalue(), caught


def test_the_sampled_strategy_prints_warns_and_returns_the_same_for_every_K():
    outs = []
    for seed in _seeds_with_K([1, 3]):
        result, err, caught = _run(Counted(), strategy="sample", mean_trials=2.0, seed=seed, progress=True)
        outs.append((result, err, [(w.category, str(w.message)) for w in caught]))
    (a, err_a, warn_a), (b, err_b, warn_b) = outs
    assert err_a == err_b and PROGRESS_LABEL in err_a and not any(ch.isdigit() for ch in err_a)  # one bar, no count
    assert warn_a == warn_b  # the tune seed's warning, then the winner's run's: none per trial
    for r in (a, b):
        assert len(r.runs) == 1 and r.chosen == 0 and r.runs[0].config.seed is None  # no trial seed (its index)
        assert "Not covered: the run's wall time" in r.guarantee_report() and r.timing in r.to_json()
    assert json.loads(a.to_json()).keys() == json.loads(b.to_json()).keys()
    assert a.statement == b.statement and a.timing == b.timing and a.guarantee == b.guarantee


def test_the_sampled_strategy_padded_to_max_trials_calls_the_objective_alike_for_every_K():
    shapes = []
    for seed in _seeds_with_K([1, 3]):
        objective = Counted()
        padded, _, _ = _run(objective, strategy="sample", mean_trials=2.0, seed=seed, max_trials=4, progress=False)
        plain, _, _ = _run(Counted(), strategy="sample", mean_trials=2.0, seed=seed, progress=False)
        shapes.append(objective.rows)
        assert padded.hyperparameters == plain.hyperparameters  # the first K trials' release
        assert padded.runs[0].noisy_score == plain.runs[0].noisy_score
        assert "Padded to max_trials = 4 DP-GIBO runs" in padded.guarantee_report()
    # 4 DP-GIBO runs (one batch of 2) and their scored final points, whatever K is
    assert shapes[0] == shapes[1] == [2, 1] * 4


def test_an_error_during_the_sampled_trials_names_no_trial():
    seen = set()
    for fail_at in (1, 2, 4):  # the first trial's batch, its scored point, the second trial's batch
        objective = Counted(fail_at=fail_at)
        with pytest.raises(HiddenTrialError) as info:
            _run(objective, strategy="sample", mean_trials=2.0, seed=_seeds_with_K([3])[0], progress=False)
        assert len(objective.rows) == fail_at and info.value.__cause__ is None
        seen.add(str(info.value))
    assert seen == {HIDDEN_TRIAL_MESSAGE}


@pytest.mark.parametrize(
    "kw", [dict(strategy="sample", space=SPACE), dict(method="private_random_search", space=BOX)], ids=["sample", "prs"]
)
def test_a_selection_writes_no_checkpoint(tmp_path, kw):
    objective = Counted()
    directory = tmp_path / "checkpoint"
    with pytest.raises(ValueError, match="checkpoint_dir"):
        _run(objective, checkpoint_dir=directory, progress=False, **kw)
    assert not directory.exists() and objective.rows == []


def _prs_trials(seed, mu0):
    r"""What ``tune(BOX, method="private_random_search", seed=seed)`` ran (its per-trial ``mu0``),
    through the NON-PRIVATE diagnostic."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return private_random_search(
            lambda X: losses(BOX.to_natural(X)),
            BOX.bounds,
            mean_trials=2.0,  # E[K] = T b = 1 x 2
            per_trial_mu=mu0,
            loss_clip=3.0,
            target_delta=1e-5,
            seed=child_seeds([seed], 2)[0],
            non_private_trials=True,
        )


def test_a_forced_private_random_search_returns_prints_and_pads_alike_for_every_K():
    first, _, _ = _run(Counted(), BOX, method="private_random_search", seed=0, progress=False)
    mu0 = first.runs[0].result.result.guarantee.details["per_trial_mu"]
    by_k = {}
    for seed in range(30):
        by_k.setdefault(_prs_trials(seed, mu0).num_evaluations, seed)
    (ka, a), (kb, b) = sorted(by_k.items())[:2]
    runs = []
    for seed in (a, b):
        result, err, caught = _run(Counted(), BOX, method="private_random_search", seed=seed, progress=True)
        trials = _prs_trials(seed, mu0)
        text = repr(result) + str(result) + result.to_json() + result.guarantee_report()
        losers = [s for s in trials.history.extras["noisy_scores"].tolist() if s != trials.released_score]
        assert len(losers) == trials.num_evaluations - 1 and not any(repr(s) in text for s in losers)
        assert result.runs[0].noisy_score == trials.released_score and "num_evaluations" not in text
        runs.append((err, [str(w.message) for w in caught], result.timing))
    assert runs[0] == runs[1] and PROGRESS_LABEL in runs[0][0]
    for seed in (a, b):  # padded: max_trials evaluations whatever K is, and the unpadded release
        objective = Counted()
        padded, _, _ = _run(objective, BOX, method="private_random_search", seed=seed, max_trials=9, progress=False)
        assert sum(objective.rows) == 9 and padded.hyperparameters == BOX.to_natural(_prs_trials(seed, mu0).theta)
        assert padded.guarantee_report().count("Padded to max_trials = 9") == 1
