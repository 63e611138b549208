r"""``methods.proxy_search``: the search on a public proxy behind ``proxy_then_train`` (screening with
repeats, the public defaults among the candidates, a fresh final round for the best few)."""

import math

import pytest
import torch

from botorch_dp.methods.proxy_search import (
    DEFAULT_FINALISTS,
    DEFAULT_REPEATS,
    ProxySearch,
    natural_configurations,
    with_defaults,
)
from botorch_dp.methods.training_proxy import default_configuration
from botorch_dp.tuning import Hyperparameter, SearchSpace

SPACE = SearchSpace([Hyperparameter("lr", 0.01, 2.0, log_scale=True), Hyperparameter("momentum", 0.0, 0.95)])


def _configs(count):
    return [({}, torch.tensor([(j + 1) / (count + 2), 0.25], dtype=torch.float64)) for j in range(count)]


class _Draws:
    r"""A fake proxy training: candidate ``j``'s ``k``-th training scores ``table[j][k]``; counts the calls."""

    def __init__(self, configs, table):
        self.keys = [float(theta[0]) for _, theta in configs]
        self.table = table
        self.calls = [0] * len(configs)

    def __call__(self, config):
        j = self.keys.index(float(config[1][0]))
        value = self.table[j][self.calls[j]]
        self.calls[j] += 1
        return value


def test_the_screening_ranks_by_the_mean_of_the_repeats_not_by_the_luckiest_draw():
    configs = _configs(2)
    # candidate 0 has the single best draw (0.0) but the worse mean (0.4 against 0.3)
    draws = _Draws(configs, [[0.0, 0.6, 0.6], [0.3, 0.3, 0.3]])
    outcome = ProxySearch(repeats=3, finalists=1).choose(draws, configs)
    assert outcome.index == 1 and draws.calls == [3, 3]
    assert torch.equal(outcome.screening, torch.tensor([[0.0, 0.6, 0.6], [0.3, 0.3, 0.3]], dtype=torch.float64))
    assert outcome.final.numel() == 0 and outcome.finalists == (1,) and outcome.trainings == 6
    one = ProxySearch(repeats=1, finalists=1).choose(_Draws(configs, [[0.0], [0.3]]), configs)
    assert one.index == 0  # one draw each: the lucky draw wins


def test_the_finalists_are_scored_on_fresh_trainings_only():
    configs = _configs(3)
    # screening: 0 is best by luck (mean 0), 1 second (0.3), 2 last; fresh: 0 is really 0.5, 1 is 0.3 (pooling
    # the screening with the fresh draws would still pick 0: 0.25 against 0.3)
    table = [[0.0, 0.0, 0.5, 0.5], [0.3, 0.3, 0.3, 0.3], [0.9, 0.9, 0.9, 0.9]]
    draws = _Draws(configs, table)
    outcome = ProxySearch(repeats=2, finalists=2).choose(draws, configs)
    assert outcome.finalists == (0, 1) and outcome.index == 1
    assert draws.calls == [4, 4, 2]  # the finalists trained `repeats` more times, the others not
    assert torch.equal(outcome.final, torch.tensor([[0.5, 0.5], [0.3, 0.3]], dtype=torch.float64))
    assert outcome.trainings == ProxySearch(repeats=2, finalists=2).trainings(3) == 10
    summary = outcome.summary()
    assert summary["screening_means"] == pytest.approx([0.0, 0.3, 0.9]) and summary["chosen"] == 1
    assert summary["finalist_means"] == pytest.approx([0.5, 0.3]) and summary["proxy_trainings"] == 10
    # without the fresh round the lucky candidate would have won
    assert ProxySearch(repeats=2, finalists=1).choose(_Draws(configs, table), configs).index == 0


def test_more_finalists_than_candidates_retrains_all_and_one_candidate_needs_no_final_round():
    configs = _configs(2)
    draws = _Draws(configs, [[0.1, 0.9], [0.2, 0.2]])
    outcome = ProxySearch(repeats=1, finalists=5).choose(draws, configs)
    assert outcome.finalists == (0, 1) and outcome.index == 1 and draws.calls == [2, 2]
    assert ProxySearch(repeats=1, finalists=5).trainings(2) == 4
    single = ProxySearch().choose(_Draws(_configs(1), [[0.4] * 9]), _configs(1))
    assert single.index == 0 and single.trainings == DEFAULT_REPEATS


def test_a_diverged_training_ranks_last():
    configs = _configs(2)
    outcome = ProxySearch(repeats=2, finalists=1).choose(_Draws(configs, [[math.nan, 0.1], [5.0, 5.0]]), configs)
    assert outcome.index == 1 and outcome.screening[0, 0] == math.inf


@pytest.mark.parametrize("field", ["repeats", "finalists"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_bad_counts_are_refused_naming_the_argument(field, value):
    with pytest.raises(ValueError, match=field):
        ProxySearch(**{field: value})
    assert (ProxySearch().repeats, ProxySearch().finalists) == (DEFAULT_REPEATS, DEFAULT_FINALISTS)


def test_no_candidate_is_refused():
    with pytest.raises(ValueError, match="configs"):
        ProxySearch().choose(lambda config: 0.0, [])


def test_the_centre_of_the_space_is_the_default_candidate_and_comes_first():
    configs = _configs(3)
    candidates = with_defaults(SPACE, configs, None)
    centre = default_configuration(SPACE)
    assert len(candidates) == 4 and torch.equal(candidates[0][1], centre[1])
    assert SPACE.to_natural(candidates[0][1])["lr"] == pytest.approx(math.sqrt(0.01 * 2.0), rel=1e-12)
    assert all(torch.equal(a[1], b[1]) for a, b in zip(candidates[1:], configs, strict=True))
    assert with_defaults(SPACE, configs, ()) == configs  # none asked for


def test_given_defaults_come_first_in_natural_units_and_duplicates_are_dropped():
    given = [{"lr": 0.1, "momentum": 0.9}, {"lr": 0.3, "momentum": 0.0}]
    configs = natural_configurations(SPACE, [{"lr": 0.3, "momentum": 0.0}, {"lr": 0.05, "momentum": 0.5}], "tuner")
    candidates = with_defaults(SPACE, configs, given)
    natural = [SPACE.to_natural(theta) for _, theta in candidates]
    assert [round(p["lr"], 10) for p in natural] == [0.1, 0.3, 0.05]  # the given (0.3, 0) once
    assert [round(p["momentum"], 10) for p in natural] == [0.9, 0.0, 0.5]


@pytest.mark.parametrize("defaults", ["lr", {"lr": 0.1}, 3, [0.1]])
def test_bad_defaults_are_refused_naming_the_argument(defaults):
    with pytest.raises(ValueError, match="defaults"):
        with_defaults(SPACE, _configs(1), defaults)
