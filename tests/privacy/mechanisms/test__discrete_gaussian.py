r"""The exact discrete Gaussian sampler (issue 40, item 1): integer arithmetic on random words, checked
against its pmf (chi-square), its Bernoulli(exp(-x)) steps against their probabilities, and its
moments at the release scale.

Statistical tests use fixed seeds and bounds with a false-failure probability below about
``10⁻⁶`` each (stated at each bound).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from botorch_dp.privacy.mechanisms import _noise
from botorch_dp.privacy.mechanisms._discrete_gaussian import (
    _bernoulli_exp,
    _uniform_below,
    discrete_gaussian_from_words,
)


def _seeded_words(seed: int):
    return _noise._word_source(torch.Generator().manual_seed(seed), False)


def test_uniform_below_rejects_words_past_the_last_whole_multiple():
    words = iter([torch.tensor([2**62 - 1, 5]), torch.tensor([7])])  # 2^62 − 1 ≥ limit for bound 3
    out = _uniform_below(torch.tensor([3, 3]), lambda n: next(words)[:n])
    assert out.tolist() == [7 % 3, 5 % 3]


def test_bernoulli_exp_matches_its_probability():
    words = _seeded_words(1)
    n = 40_000
    for num, den in [(0, 1), (1, 3), (1, 1), (5, 2), (7, 3)]:
        hits = _bernoulli_exp(torch.full((n,), num), torch.full((n,), den), words)
        p = math.exp(-num / den)
        assert abs(float(hits.double().mean()) - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-12  # 5 sd: 6e-7


@pytest.mark.parametrize("scale", [1, 2, 3])
def test_sampler_matches_the_exact_pmf(scale):
    n = 30_000
    draws = discrete_gaussian_from_words(n, scale, _seeded_words(scale)).numpy()
    top = 4 * scale
    support = np.arange(-top, top + 1)
    full = np.arange(-60 * scale, 60 * scale + 1)
    weights = np.exp(-(full**2) / (2 * scale**2))
    pmf = weights / weights.sum()
    expected = np.array([pmf[np.abs(full) > top].sum()] + [pmf[full == k][0] for k in support]) * n
    counts = np.array([(np.abs(draws) > top).sum()] + [(draws == k).sum() for k in support])
    assert chisquare(counts, expected).pvalue > 1e-6


def test_sampler_at_the_release_scale_has_the_right_mean_and_variance():
    scale, n = 2**20 + 12345, 20_000
    for words in (_seeded_words(7), _noise._word_source(None, False)):
        x = discrete_gaussian_from_words(n, scale, words).double() / scale
        assert abs(float(x.mean())) < 5 / math.sqrt(n)  # 5 sd
        assert abs(float(x.var()) - 1) < 5 * math.sqrt(2 / n)  # 5 sd of the sample variance
        assert float((x.abs() < 1).double().mean()) == pytest.approx(0.6827, abs=5 * math.sqrt(0.22 / n))
