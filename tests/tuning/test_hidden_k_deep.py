r"""The deep hidden-K check (``hidden_k_helpers``) on each of tune's private selections: two calls whose hidden number
of trials K differ let a user see the same (every public attribute of the result, recursively, every report, the
warnings, the log records, the progress bar), after masking only the floats, the released categorical level and
ids. K is forced through the seed, drawn by the same child streams tune draws it from (NON-PRIVATE helpers of the
existing hidden-K tests), and each test checks the objective really ran K times."""

import re

import numpy as np
import pytest

from botorch_dp import tune
from botorch_dp.privacy.analysis.private_selection import sample_num_trials
from botorch_dp.tuning import load_sklearn_classification
from botorch_dp.utils import child_seeds
from tests.methods.test_training_runs import DELTA, SPACE, objective
from tests.tuning import test_hidden_k as validation_side
from tests.tuning import test_tune_amp as amp
from tests.tuning.hidden_k_helpers import assert_same_walk, observe

MEAN = 3.0


@pytest.fixture(scope="module")
def small():
    data = load_sklearn_classification("digits", seed=0)
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


def _training_K(seed, distribution):
    r"""K of ``tune(seed=seed)``'s selection over training runs: the method's seed is tune's child seed, K the first
    of its three child streams (``methods.training_runs._randomness``)."""
    rng = np.random.default_rng(child_seeds(int(child_seeds([seed], 1)[0]), 3)[0])
    return sample_num_trials(distribution=distribution, mean_trials=MEAN, rng=rng)


def _two_seeds(draw, skip_zero=True):
    r"""Two seeds whose K differ (the two smallest K found, K = 0 left out: it releases nothing)."""
    found: dict[int, int] = {}
    for seed in range(60):
        found.setdefault(draw(seed), seed)
    if skip_zero:
        found.pop(0, None)
    (k1, s1), (k2, s2) = sorted(found.items())[:2]
    assert k1 != k2
    return (k1, s1), (k2, s2)


def _dp_sgd_walks_agree(small, distribution, options, **kw):
    observations = []
    for k, seed in _two_seeds(lambda s: _training_K(s, distribution)):
        obj = objective(small)
        args = dict(epsilon=3.0, delta=DELTA, mean_trials=MEAN, protect="both", plan_options=options, seed=seed, **kw)
        observations.append(observe(lambda obj=obj, args=args: tune(obj, SPACE, progress=True, **args)))
        assert len(obj.seen) == k  # the helper forced tune's K
    rows = assert_same_walk(*observations)
    assert any(path.endswith("guarantee.training.details") for path, _, _ in rows)  # the walk reached the details
    assert any(path == "stderr" and "hidden" in value for path, _, value in rows)  # and the progress bar
    assert any(re.search(r"records\(\)\[\d\]\.event$", path) for path, _, _ in rows)  # and the ledger's records


@pytest.mark.privacy_fast  # the fast version of a privacy property (tests/conftest.py)
def test_a_dp_sgd_training_selection_shows_nothing_of_K_fast(small):
    r"""The fast version: geometric K, RDP accounting (no privacy-profile calibration)."""
    _dp_sgd_walks_agree(small, "truncated_negative_binomial", {"distribution": "geometric"}, accounting="rdp")


@pytest.mark.parametrize(
    "distribution, options",
    [("truncated_negative_binomial", {"distribution": "geometric"}), ("poisson", {"distribution": "poisson"})],
    ids=["geometric", "poisson"],
)
def test_a_dp_sgd_training_selection_shows_nothing_of_K(small, distribution, options):
    r"""tune's own accounting choice (the privacy profile where it is tighter), geometric and Poisson K."""
    _dp_sgd_walks_agree(small, distribution, options)


@pytest.mark.privacy_fast  # the fast version of a privacy property (tests/conftest.py)
def test_an_amp_training_selection_shows_nothing_of_K(monkeypatch):
    data = amp.load_logistic_data("synthetic", seed=3, num_examples=120, num_features=3)
    observations = []
    for k, seed in _two_seeds(amp._tune_K):
        obj = amp._objective(data)
        spy = amp._Spy(obj)
        spy.fit = amp.lr.fit_amp
        with monkeypatch.context() as patch:
            patch.setattr(amp.lr, "fit_amp", spy)
            args = dict(epsilon=amp.EPSILON, delta=amp.DELTA, mean_trials=amp.MEAN, protect="both", seed=seed)
            observations.append(observe(lambda obj=obj, args=args: tune(obj, obj.space, progress=True, **args)))
        assert len(spy.calls) == k
    rows = assert_same_walk(*observations)
    assert any(path.endswith(".model.theta") for path, _, _ in rows)  # the released AMP model was walked


@pytest.mark.privacy_fast  # the fast version of a privacy property (tests/conftest.py)
def test_a_sampled_validation_selection_shows_nothing_of_K():
    observations = []
    for k, seed in zip((1, 3), validation_side._seeds_with_K([1, 3]), strict=True):
        objective_calls = validation_side.Counted()
        observations.append(
            observe(
                lambda c=objective_calls, seed=seed: tune(
                    c,
                    validation_side.SPACE,
                    epsilon=3.0,
                    delta=1e-5,
                    strategy="sample",
                    mean_trials=2.0,
                    seed=seed,
                    progress=True,
                    **validation_side.TINY,
                )
            )
        )
        assert len(objective_calls.rows) == 2 * k  # each trial: one DP-GIBO batch, then its scored point
    rows = assert_same_walk(*observations)
    assert any(kind == "str" and "<released>" in value for _, kind, value in rows if isinstance(value, str))


class _Fake:
    __module__ = "botorch_dp.fake"  # walked like the package's objects (its public attributes)


@pytest.mark.privacy_fast  # the fast version of a privacy property (tests/conftest.py)
def test_the_walk_masks_only_the_noise_and_names_a_count_anywhere():
    r"""No training: the helper on synthetic results, so that it can fail. Released floats and floats in text are
    masked; a K-dependent integer in a nested ``details``, a float outside the released paths, a count in a warning
    and a key named like a count of trials are each found."""
    from tests.tuning.hidden_k_helpers import Observation

    def fake(k, score, details=None, warned=(), key="note"):
        result = _Fake()
        level = "adam" if k == 1 else "sgd"  # the released categorical level differs with the winner
        result.hyperparameters, result.noisy_score = {"lr": score, "opt": level}, score
        result.guarantee = {"details": {"mean_trials": 3, key: details, "epsilon": 1.5}}
        result.report = f"winner lr = {score:.4g} after {0.1 * k:.2f} s; dp_sgd with {level!r}"
        return Observation(result, [("UserWarning", w) for w in warned], [], "", "")

    assert_same_walk(fake(1, 0.25), fake(2, 0.5))  # the released values and a wall time differ: masked
    with pytest.raises(AssertionError, match=r"guarantee.*details.*note"):
        assert_same_walk(fake(1, 0.25, details=[1]), fake(2, 0.5, details=[1, 2]))  # len(trials) nested in details
    with pytest.raises(AssertionError, match=r"details.*note"):
        assert_same_walk(fake(1, 0.25, details=1.0), fake(2, 0.5, details=2.0))  # a float K outside the released
    with pytest.raises(AssertionError, match=r"warnings\[0\]"):
        assert_same_walk(fake(1, 0.25, warned=["ran 1 trials"]), fake(2, 0.5, warned=["ran 2 trials"]))
    with pytest.raises(AssertionError, match=r"'num_trials', a count"):
        assert_same_walk(fake(1, 0.25, key="num_trials"), fake(2, 0.5, key="num_trials"))


@pytest.mark.privacy_fast  # the fast version of a privacy property (tests/conftest.py)
def test_a_forced_private_random_search_shows_nothing_of_K():
    box, tiny = validation_side.BOX, validation_side.TINY
    first = tune(
        validation_side.Counted(), box, epsilon=3.0, delta=1e-5, method="private_random_search", seed=0, **tiny
    )
    mu0 = first.runs[0].result.result.guarantee.details["per_trial_mu"]  # public: the per-trial budget
    by_k: dict[int, int] = {}
    for seed in range(30):
        by_k.setdefault(validation_side._prs_trials(seed, mu0).num_evaluations, seed)
    assert len(by_k) >= 2  # two seeds whose K differ (the NON-PRIVATE diagnostic draws tune's K)
    observations = []
    for _, seed in sorted(by_k.items())[:2]:
        args = dict(epsilon=3.0, delta=1e-5, method="private_random_search", seed=seed, **tiny)
        observations.append(observe(lambda args=args: tune(validation_side.Counted(), box, progress=True, **args)))
    rows = assert_same_walk(*observations)
    assert any(path.endswith("guarantee.details") for path, _, _ in rows)
