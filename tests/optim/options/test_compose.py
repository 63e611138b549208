r"""Options compose (issue 29, item 4): every pair of option values from two families runs for
three iterations with finite releases and the ledger within the budget, on in-memory users and
on partitions, or is refused when the config is built, by a rule that one of the two strategies
declares (``conflicts`` or ``requires``), with an error that names both and says why.

The option values are those of the pins (``tests/test_option_pins.FAMILIES``); the refused pairs
are listed here, so that a change which refuses (or admits) a pair fails until it is listed.
"""

import itertools
import math
import warnings

import pytest
import torch

from botorch_dp.distributed.partitions import InProcessPartitions
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.ledger import parse_release_key
from tests.test_option_pins import FAMILIES, N, _Half, _objective, _settings

T = 3
MU = 1.0

#: The pairs still refused, each by the rule that refuses it (a pattern of the error).
REFUSED = {
    "clip=adaptive+step=adagrad_full_private": "does not combine with clip_bound='adaptive'",
    "noise=adaptive_norm+step=adagrad_full_private": "does not combine with noise_schedule='adaptive_norm'",
    "projection=posterior+step=adagrad_full_private": "needs one basis for every step",
}


def _pairs() -> dict[str, dict]:
    cases = {}
    for (fa, va), (fb, vb) in itertools.combinations(FAMILIES.items(), 2):
        for (a, oa), (b, ob) in itertools.product(list(va.items())[1:], list(vb.items())[1:]):
            cases[f"{fa}={a}+{fb}={b}"] = {**oa, **ob}
    # the single value of each family that needs a partner (min_noisy_norm needs released norms)
    return {
        name: case
        for name, case in cases.items()
        if "selection=min_noisy_norm" not in name or "noise=adaptive_norm" in name
    }


PAIRS = _pairs()


def _config(overrides: dict) -> tuple[DPGIBOConfig, bool]:
    overrides = dict(overrides)
    partitions = overrides.pop("_partitions", False)
    overrides.pop("_objective", None)
    settings = {**_settings(overrides), "num_iterations": T, "privacy_mu": MU, "user_chunk_size": N // 2}
    return DPGIBOConfig(**settings), partitions


def test_the_refused_table_names_pairs_that_exist():
    assert set(REFUSED) <= set(PAIRS)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_every_pair_runs_within_budget_or_is_refused_by_a_declared_rule(name):
    expected = REFUSED.get(name, "")
    try:
        config, partitions = _config(PAIRS[name])
    except ValueError as err:
        assert expected, f"{name} was refused: {err}"
        assert str(err).startswith(("step_rule=", "clip_bound=", "noise_schedule=", "subspace=", "selection=")), err
        assert expected in str(err)
        return
    assert not expected, f"{name} should be refused ({expected})"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = DPGIBO(config)
        source = InProcessPartitions([_Half(0), _Half(N // 2)]) if partitions else _objective
        release = opt.run(source, progress=False).release
    steps = len(release.batch_sizes)
    assert 1 <= steps <= T and torch.isfinite(release.released_gradients).all()
    assert torch.isfinite(release.iterates).all() and torch.isfinite(release.theta).all()
    records = opt.ledger.validation.records()
    parts = [parse_release_key(r.key) for r in records]
    assert {step for step, _ in parts if step is not None} == set(range(steps))  # every step charged
    assert all(part in {"grad", "norm", "clip", "precond", "select"} for _, part in parts)
    assert sum(part == "grad" for _, part in parts) == steps  # one gradient per step
    assert all(math.isfinite(r.event.mu) and r.event.mu > 0 for r in records if hasattr(r.event, "mu"))
    mu = opt.ledger.validation.mu()
    assert mu <= MU * (1 + 1e-12), f"{name}: the run spent mu = {mu!r} of {MU}"
    assert release.guarantee.holds and release.guarantee.mu == mu


def test_a_selection_that_needs_released_norms_is_refused_without_them():
    with pytest.raises(
        ValueError,
        match="selection='min_noisy_norm' needs the released noisy gradient norms, which only "
        "noise_schedule='adaptive_norm' releases",
    ):
        _config(FAMILIES["selection"]["min_noisy_norm"])


def _release(overrides: dict, partitions: bool):
    config, _ = _config(overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = DPGIBO(config)
        source = InProcessPartitions([_Half(0), _Half(N // 2)]) if partitions else _objective
        return opt.run(source, progress=False).release, opt.ledger.validation.records()


@pytest.mark.parametrize(
    "extra",
    [
        {"subspace": FAMILIES["projection"]["posterior"]["subspace"], "selection": "min_noisy_norm"},
        {
            "subspace": FAMILIES["projection"]["public_pca"]["subspace"],
            **FAMILIES["selection"]["noisy_loss"],
            "step_rule": "adagrad_full",
            "preconditioner": "noisy_debiased",
            "bias_tolerance": 0.05,
            "max_batch_size": 4,
        },
    ],
    ids=["posterior+min_noisy_norm", "public_pca+noisy_loss+adagrad_full+adaptive_batches"],
)
def test_adaptive_clipping_with_the_adaptive_schedule_and_more_on_partitions_is_the_in_memory_run(extra):
    r"""Many options at once: adaptive clipping, the adaptive schedule, a moving subspace and a
    selection, on partitions (one chunk of users each) and in memory: the same run bit for bit."""
    overrides = {**FAMILIES["clip"]["adaptive"], **FAMILIES["noise"]["adaptive_norm"], **extra}
    memory, memory_records = _release(overrides, partitions=False)
    split, split_records = _release(overrides, partitions=True)
    assert len(memory.clip_bounds) == len(memory.batch_sizes) + 1 and len(memory.noisy_norms) == len(memory.batch_sizes)
    assert len(set(memory.clip_bounds)) > 1  # the bound moved
    for name in ("released_gradients", "iterates", "evaluation_points"):
        assert torch.equal(getattr(memory, name), getattr(split, name)), name
    for name in ("clip_bounds", "clip_counts", "noisy_norms", "step_mus", "selected_index"):
        assert getattr(memory, name) == getattr(split, name), name
    assert [(r.key, r.event) for r in memory_records] == [(r.key, r.event) for r in split_records]
