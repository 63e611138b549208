r"""Batch rules (botorch_dp/optim/options/batches.py): a fixed rule asks the batch search for exactly
``size`` points (the projection's default when none is given) with no trace tolerance; the adaptive
rule asks for points until the trace tolerance or ``max_size``; each rule is rebuilt from its ``spec()``
and bad settings are refused naming the field."""

import json

import pytest
import torch

import botorch_dp.optim.options.batches as batches_module
from botorch_dp.optim.options import AdaptiveBatches, FixedBatches, from_spec


@pytest.mark.parametrize(
    "rule",
    [FixedBatches(), FixedBatches(4, "greedy", 50, "reference"), AdaptiveBatches(None, bias_tolerance=0.3, max_size=7)],
)
def test_a_rule_is_rebuilt_from_its_spec(rule):
    assert from_spec("batches", json.loads(json.dumps(rule.spec()))) == rule


@pytest.mark.parametrize(
    ("rule", "default", "asked"),
    [
        (FixedBatches(4), 3, dict(batch_size=4, max_batch_size=4, bias_tolerance=None)),
        (FixedBatches(), 3, dict(batch_size=3, max_batch_size=3, bias_tolerance=None)),
        (
            AdaptiveBatches(None, bias_tolerance=0.3, max_size=7),
            3,
            dict(batch_size=3, max_batch_size=7, bias_tolerance=0.3),
        ),  # fmt: skip
        (AdaptiveBatches(None, bias_tolerance=0.3), 3, dict(batch_size=3, max_batch_size=3, bias_tolerance=0.3)),
    ],
)
def test_a_rule_asks_the_search_for_its_sizes_and_tolerance(monkeypatch, rule, default, asked):
    seen = {}

    def search_batch(gp, theta, bounds, generator, **kwargs):
        seen.update(kwargs)
        return torch.zeros(kwargs["max_batch_size"], theta.shape[0], dtype=torch.float64)

    monkeypatch.setattr(batches_module, "search_batch", search_batch)
    theta = torch.zeros(2, dtype=torch.float64)
    batch = rule.select(None, theta, None, None, basis=None, default=default, num_restarts=2, raw_samples=8)
    assert {k: seen[k] for k in asked} == asked and batch.shape == (rule.per_step(default), 2)
    assert seen["batch_search"] == rule.search and seen["speed"] == rule.speed and seen["maxiter"] == rule.maxiter
    assert rule.tolerance == asked["bias_tolerance"]


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: FixedBatches(0), r"batch_size \(b\)"),
        (lambda: FixedBatches(search="random"), "batch_search must be one of"),  # type: ignore[arg-type]
        (lambda: FixedBatches(speed="slowest"), "acqf_speed must be one of"),  # type: ignore[arg-type]
        (lambda: FixedBatches(maxiter=0), "acqf_maxiter"),
        (lambda: AdaptiveBatches(None, bias_tolerance=0.0), "bias_tolerance"),
        (lambda: AdaptiveBatches(None, max_size=0), r"max_batch_size \(b_max\)"),
        (lambda: AdaptiveBatches(3), "Give either batch_size .* or bias_tolerance .*, not both"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()
