r"""``botorch_dp.baselines.selection`` (issue 40, item 2): a private selection's K and losing trials stay
hidden on every channel: the result (repr, str, fields), errors raised mid-procedure, warnings, the
progress output, and, with ``max_trials``, the run's length; the NON-PRIVATE diagnostic says so."""

import dataclasses
import functools
import io
import math
import warnings
from contextlib import redirect_stderr

import numpy as np
import pytest
import torch

from botorch_dp.baselines import dp_hypo, private_random_search
from botorch_dp.baselines.selection import (
    HIDDEN_TRIAL_MESSAGE,
    PROGRESS_LABEL,
    HiddenTrialError,
    NonPrivateTrials,
    PrivateSelectionResult,
)
from botorch_dp.privacy.analysis.private_selection import num_trials_tail, sample_num_trials, tnb_gamma_for_mean

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
N = 6


def quadratic(X):
    centres = torch.linspace(0.3, 0.6, N, dtype=torch.float64)
    return (X[:, :1] - centres).pow(2) + X[:, 1:].pow(2)  # q x n


PRS = functools.partial(private_random_search, mean_trials=6.0, per_trial_mu=0.5, loss_clip=1.0, batch_size=4)
HYPO = functools.partial(
    dp_hypo,
    mean_trials=4.0,
    per_trial_mu=0.5,
    loss_clip=1.0,
    ratio_bound=2.0,
    num_candidates=64,
    refit_every=4,
    density_update_every=2,
)
SELECTIONS = {"private_random_search": PRS, "dp_hypo": HYPO}
#: DP-HyPO's GP fits take seconds: its cases of the longest tests are slow (private random search's stay fast)
WITH_SLOW_HYPO = ["private_random_search", pytest.param("dp_hypo", marks=pytest.mark.slow)]


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seeds' PrivacyWarning
        return fn(*args, **kw)


def _two_seeds_with_different_K(select):
    r"""Two seeds whose selections run different numbers of trials (read from the NON-PRIVATE diagnostic)."""
    found = {}
    for seed in range(20):
        trials = _quiet(select, quadratic, BOUNDS, seed=seed, non_private_trials=True)
        found.setdefault(trials.num_evaluations, (seed, trials))
        if len(found) == 2:
            return tuple(found.values())
    raise AssertionError("twenty seeds drew one K")


@pytest.mark.parametrize("name", WITH_SLOW_HYPO)
def test_the_result_is_the_winner_only_and_the_same_shape_for_every_K(name):
    select = SELECTIONS[name]
    (a, trials_a), (b, trials_b) = _two_seeds_with_different_K(select)
    for seed, trials in ((a, trials_a), (b, trials_b)):
        result = _quiet(select, quadratic, BOUNDS, seed=seed)
        assert type(result) is PrivateSelectionResult
        assert [f.name for f in dataclasses.fields(result)] == ["theta", "released_score", "guarantee"]
        assert set(vars(result)) == {"theta", "released_score", "guarantee"}
        release = trials.release  # the diagnostic's release: the same winner, score and guarantee
        assert torch.equal(result.theta, release.theta) and result.released_score == release.released_score
        assert result.guarantee == release.guarantee
        assert torch.equal(
            result.theta, trials.history.points[int(torch.argmin(trials.history.extras["noisy_scores"]))]
        )
        text = repr(result) + str(result)
        losers = [s for s in trials.history.extras["noisy_scores"].tolist() if s != result.released_score]
        assert len(losers) == trials.num_evaluations - 1
        assert not any(repr(s) in text or f"{s:.4g}" in text for s in losers)
        assert "num_evaluations" not in text and "history" not in text
    # nothing the result states depends on K: the guarantee (description, details) is the same for both
    ga = _quiet(select, quadratic, BOUNDS, seed=a).guarantee
    gb = _quiet(select, quadratic, BOUNDS, seed=b).guarantee
    assert ga == gb and "Not covered: the run's wall time" in ga.description


def test_the_non_private_diagnostic_says_so_and_prints_no_trial():
    trials = _quiet(PRS, quadratic, BOUNDS, seed=1, non_private_trials=True)
    assert isinstance(trials, NonPrivateTrials) and trials.NON_PRIVATE and not trials.history.public
    for text in (repr(trials), str(trials)):
        assert text.startswith("NonPrivateTrials(NON-PRIVATE") and "publish .release only" in text
        assert not any(f"{s:.4g}" in text for s in trials.history.extras["noisy_scores"].tolist())
    assert type(trials.release) is PrivateSelectionResult and trials.release.released_score == trials.released_score


class _FailsAtCall:
    r"""An objective whose ``j``-th call raises (or returns a wrong shape) with a message naming ``j``."""

    def __init__(self, j, how):
        self.j, self.how, self.calls = j, how, 0

    def __call__(self, X):
        self.calls += 1
        if self.calls == self.j:
            if self.how == "raise":
                raise RuntimeError(f"failed at call {self.j}")
            return torch.zeros(X.shape[0] + 1, N, dtype=torch.float64)  # a wrong shape
        return quadratic(X)


@pytest.mark.parametrize("name", sorted(SELECTIONS))
@pytest.mark.parametrize("how", ["raise", "shape"])
def test_an_error_during_the_trials_is_one_type_and_message_whatever_the_trial(name, how):
    select = SELECTIONS[name]
    one_per_call = dict(batch_size=1) if name == "private_random_search" else {}
    seen = set()
    for j in (1, 2, 3):
        objective = _FailsAtCall(j, how)
        with pytest.raises(HiddenTrialError) as info:  # max_trials = 3: at least 3 calls, whatever K is
            _quiet(select, objective, BOUNDS, seed=0, max_trials=3, **one_per_call)
        err = info.value
        assert objective.calls == j and type(err) is HiddenTrialError
        assert err.__cause__ is None and err.__suppress_context__  # the original (naming the trial) is not shown
        seen.add(str(err))
    assert seen == {HIDDEN_TRIAL_MESSAGE}
    assert not any(ch.isdigit() for ch in HIDDEN_TRIAL_MESSAGE)


@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_a_non_finite_loss_counts_zero_and_raises_nothing(name):
    mu0 = 1e9  # noise C/(n mu0): negligible

    def with_nan(X):
        losses = 0.5 * torch.ones(X.shape[0], N, dtype=torch.float64)
        losses[:, 0] = math.nan
        losses[:, 1] = math.inf
        return losses

    trials = _quiet(SELECTIONS[name], with_nan, BOUNDS, per_trial_mu=mu0, seed=2, non_private_trials=True)
    # the "zero_user" policy: the two non-finite users' terms are 0, the others 0.5: (N - 2) * 0.5 / N
    expected = (N - 2) * 0.5 / N
    assert trials.history.extras["noisy_scores"] == pytest.approx(
        torch.full((trials.num_evaluations,), expected, dtype=torch.float64), abs=1e-6
    )


@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_warnings_raised_inside_the_trials_are_dropped(name):
    def warns(X):
        warnings.warn(f"a warning at {X.tolist()}", UserWarning, stacklevel=1)
        return quadratic(X)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SELECTIONS[name](warns, BOUNDS)  # no seed: no PrivacyWarning either
    assert caught == []


def test_arguments_are_refused_before_the_first_trial():
    calls = []
    objective = lambda X: calls.append(X) or quadratic(X)
    for override, name in [
        (dict(fallback=torch.zeros(3)), "fallback"),  # refused with K >= 1 too, not only when K = 0
        (dict(batch_size=0), "batch_size"),
        (dict(max_trials=0), "max_trials"),
        (dict(target_delta=1.0), "target_delta"),
        (dict(executor="pool"), "executor"),
    ]:
        with pytest.raises(ValueError, match=name):
            PRS(objective, BOUNDS, **override)
    with pytest.raises(ValueError, match="objective must be callable"):
        PRS("objective", BOUNDS)
    with pytest.raises(ValueError, match="max_trials"):
        HYPO(objective, BOUNDS, max_trials=-1)
    assert not calls


def _counting(fn):
    rows = []

    def objective(X):
        rows.append(X.shape[0])
        return fn(X)

    return objective, rows


@pytest.mark.parametrize("name", WITH_SLOW_HYPO)
def test_max_trials_runs_a_public_number_of_trials_and_releases_what_the_first_K_give(name):
    select, M = SELECTIONS[name], 12
    (a, plain_a), (b, plain_b) = _two_seeds_with_different_K(select)
    shapes = []
    for seed, plain in ((a, plain_a), (b, plain_b)):
        assert plain.num_evaluations <= M
        objective, rows = _counting(quadratic)
        padded = _quiet(select, objective, BOUNDS, seed=seed, max_trials=M, non_private_trials=True)
        assert sum(rows) == M  # the objective's evaluations: M whatever K is
        shapes.append(rows)
        # the release, and every one of the K trials, are those of the run without padding
        assert padded.num_evaluations == plain.num_evaluations
        assert torch.equal(padded.theta, plain.theta) and padded.released_score == plain.released_score
        assert torch.equal(padded.history.points, plain.history.points)
        assert torch.equal(padded.history.extras["noisy_scores"], plain.history.extras["noisy_scores"])
        assert padded.guarantee.epsilon == plain.guarantee.epsilon
        assert padded.guarantee.details["max_trials"] == M
    assert shapes[0] == shapes[1]  # the same calls of the same sizes for both K


def test_the_tail_of_K_past_max_trials_is_the_distributions():
    gamma = tnb_gamma_for_mean(eta=1.0, mean_trials=6.0)
    assert num_trials_tail(distribution="truncated_negative_binomial", mean_trials=6.0, threshold=12) == pytest.approx(
        (1 - gamma) ** 12, rel=1e-12
    )
    rng = np.random.default_rng(0)
    for distribution, eta in (("truncated_negative_binomial", 0.5), ("poisson", 1.0)):
        draws = np.array(
            [sample_num_trials(distribution=distribution, mean_trials=6.0, rng=rng, tnb_eta=eta) for _ in range(20000)]
        )
        tail = num_trials_tail(distribution=distribution, mean_trials=6.0, threshold=9, tnb_eta=eta)
        assert abs((draws > 9).mean() - tail) < 4 * math.sqrt(tail * (1 - tail) / draws.size)


def test_the_progress_of_a_selection_is_one_bar_that_counts_nothing():
    from botorch_dp.plan import PrivateRandomSearchMethod
    from botorch_dp.privacy.ledger import PrivacyLedger

    settings = dict(mean_trials=6.0, loss_clip=1.0, per_trial_mu=0.5)
    method = PrivateRandomSearchMethod(**settings, bounds=BOUNDS, epsilon=2.0, delta=1e-5)
    select = functools.partial(private_random_search, **settings, target_delta=1e-5)  # what run_private runs
    (a, _), (b, _) = _two_seeds_with_different_K(select)
    outputs = []
    for seed in (a, b):
        err = io.StringIO()
        with redirect_stderr(err):
            _quiet(method.run_private, quadratic, ledger=PrivacyLedger(), seed=seed, progress=True)
        outputs.append(err.getvalue())
    assert outputs[0] == outputs[1] and PROGRESS_LABEL in outputs[0]
    assert not any(ch.isdigit() for ch in outputs[0])  # no count, rate or time
