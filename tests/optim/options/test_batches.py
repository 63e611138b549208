r"""Batch rules (botorch_dp/optim/options/batches.py): a fixed rule asks the batch search for exactly
``size`` points (the projection's default when none is given) with no trace tolerance; the adaptive
rule asks for points until the trace tolerance or ``max_size``; each rule is rebuilt from its ``spec()``
and bad settings are refused naming the field.

The searches (moved here from ``optim.batch_search``): a joint batch lies in the box and lowers the trace more
than a greedy one, the adaptive joint batch is the smallest that reaches the tolerance (brute force), the
search draws from its generator only, the speeds' settings reach ``optimize_acqf`` and ``qGradientInformation``
(the closed-form gradient, one thread, the warm start capped at ``WARM_MAXITER``), and the rule's names resolve
through the allow-lists ``BATCH_SEARCHES`` and ``SEARCH_SPEEDS``."""

import json
from typing import Any

import pytest
import torch
from botorch.optim import optimize_acqf
from gpytorch.kernels import RBFKernel

import botorch_dp.optim.options.batches as batches_module
from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options import AdaptiveBatches, BatchRule, FixedBatches, from_spec, register
from botorch_dp.optim.options.batches import (
    BATCH_SEARCHES,
    FAST,
    REFERENCE,
    SEARCH_SPEEDS,
    adaptive_joint_batch,
    greedy_batch,
    local_bounds,
    moved_batch,
    optimize_batch,
    posterior_trace,
    search_batch,
)
from tests.optim.options.plugin import UserStrategy, run_and_resume
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import _settings

JOINT = BATCH_SEARCHES["joint"]


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
        (FixedBatches(4, "greedy", 50, "reference"), 3, dict(batch_size=4, max_batch_size=4, bias_tolerance=None)),
        (FixedBatches(), 3, dict(batch_size=3, max_batch_size=3, bias_tolerance=None)),
        (
            AdaptiveBatches(None, bias_tolerance=0.3, max_size=7),
            3,
            dict(batch_size=3, max_batch_size=7, bias_tolerance=0.3),
        ),  # fmt: skip
        (AdaptiveBatches(None, bias_tolerance=0.3), 3, dict(batch_size=3, max_batch_size=3, bias_tolerance=0.3)),
        (
            AdaptiveBatches(None, "greedy", speed="reference", bias_tolerance=0.3),
            3,
            dict(batch_size=3, max_batch_size=3, bias_tolerance=0.3),
        ),  # fmt: skip
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
    # the rule's names resolve through the allow-lists to the objects that do the work
    assert seen["batch_search"] is BATCH_SEARCHES[rule.search] and seen["speed"] is SEARCH_SPEEDS[rule.speed]
    assert seen["maxiter"] == rule.maxiter
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


# ----------------------------------------------------------------------- the searches
SMALL = dict(num_restarts=2, raw_samples=32)


def rbf_kernel(d, ls=1.0):
    k = RBFKernel(ard_num_dims=d).to(torch.float64)
    k.lengthscale = ls
    k.requires_grad_(False)
    return k


def empty_gp(d: int, noise: float = 1e-4) -> GradientGP:
    return GradientGP(torch.empty(0, d, dtype=torch.float64), rbf_kernel(d), noise)


def setting(d: int) -> tuple[torch.Tensor, torch.Tensor]:
    theta = torch.full((d,), 2.5, dtype=torch.float64)
    box = torch.tensor([[0.0] * d, [5.0] * d], dtype=torch.float64)
    return theta, local_bounds(theta, torch.full((d,), 0.5, dtype=torch.float64), box)


def test_local_bounds_is_the_radius_box_cut_to_the_bounds():
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    theta = torch.tensor([0.05, 0.5], dtype=torch.float64)
    box = local_bounds(theta, torch.tensor([0.1, 0.2], dtype=torch.float64), bounds)
    torch.testing.assert_close(box, torch.tensor([[0.0, 0.3], [0.15, 0.7]], dtype=torch.float64))


def test_optimized_batch_lies_in_the_box_and_lowers_the_trace():
    d = 3
    theta, box = setting(d)
    gp = empty_gp(d)
    X = optimize_batch(gp, theta, box, 4, torch.Generator().manual_seed(0), **SMALL)
    assert X.shape == (4, d) and (X >= box[0]).all() and (X <= box[1]).all()
    assert posterior_trace(gp, theta, X) < 0.5 * posterior_trace(gp, theta)
    # the search is reproducible from the generator alone
    again = optimize_batch(gp, theta, box, 4, torch.Generator().manual_seed(0), **SMALL)
    assert torch.equal(X, again)


def test_joint_batch_leaves_a_smaller_trace_than_greedy():
    d = 4
    theta, box = setting(d)
    gp = empty_gp(d)
    joint = optimize_batch(gp, theta, box, d + 1, torch.Generator().manual_seed(0), **SMALL)
    greedy = greedy_batch(gp, theta, box, d + 1, torch.Generator().manual_seed(0), **SMALL)
    assert joint.shape == greedy.shape == (d + 1, d)
    # a lone point says little about the gradient, so picking one at a time is myopic
    assert posterior_trace(gp, theta, joint) < 0.5 * posterior_trace(gp, theta, greedy)


def test_adaptive_joint_batch_is_the_smallest_that_reaches_the_tolerance():
    d, eps = 3, 0.3
    theta, box = setting(d)
    gp = empty_gp(d)
    X = adaptive_joint_batch(gp, theta, box, eps, d + 1, torch.Generator().manual_seed(0), **SMALL)
    q = X.shape[0]
    assert 1 < q <= d + 1 and posterior_trace(gp, theta, X) <= eps
    # brute force: a well-searched joint batch of q - 1 points does not reach eps
    torch.manual_seed(0)
    Xs, _ = optimize_acqf(qGradientInformation(gp, theta), box, q=q - 1, num_restarts=16, raw_samples=1024)
    assert posterior_trace(gp, theta, Xs) > eps
    # greedy selection with the same tolerance needs at least as many points
    Xg = greedy_batch(gp, theta, box, d + 1, torch.Generator().manual_seed(0), tolerance=eps, **SMALL)
    assert Xg.shape[0] >= q and (posterior_trace(gp, theta, Xg) <= eps or Xg.shape[0] == d + 1)


def test_unreachable_tolerance_takes_the_full_batch_in_one_optimization():
    d = 2
    theta, box = setting(d)
    gp = empty_gp(d)
    gen = torch.Generator().manual_seed(0)
    X = adaptive_joint_batch(gp, theta, box, 1e-9, d + 1, gen, **SMALL)
    assert X.shape == (d + 1, d) and posterior_trace(gp, theta, X) > 1e-9
    # one optimization = one draw from the search generator
    probe = torch.Generator().manual_seed(0)
    torch.randint(0, 2**31 - 1, (1,), generator=probe)
    assert torch.equal(gen.get_state(), probe.get_state())


def test_empty_batch_when_the_trace_already_meets_the_tolerance():
    d = 2
    theta, box = setting(d)
    stencil = theta + 0.1 * torch.cat([torch.zeros(1, d), torch.eye(d), -torch.eye(d)]).to(torch.float64)
    gp = empty_gp(d).condition_on(stencil)
    eps = 2 * posterior_trace(gp, theta)
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    for X in (
        adaptive_joint_batch(gp, theta, box, eps, d + 1, gen, **SMALL),
        greedy_batch(gp, theta, box, d + 1, gen, tolerance=eps, **SMALL),
        search_batch(
            gp, theta, box, gen, batch_search=JOINT, batch_size=3, bias_tolerance=eps, max_batch_size=d + 1, **SMALL
        ),
    ):
        assert X.shape == (0, d) and X.dtype == torch.float64
    assert torch.equal(gen.get_state(), state)  # no search was run


def test_search_batch_fixed_sizes():
    d = 2
    theta, box = setting(d)
    gp = empty_gp(d)
    for selection in ("joint", "greedy"):
        X = search_batch(
            gp,
            theta,
            box,
            torch.Generator().manual_seed(1),
            batch_search=BATCH_SEARCHES[selection],
            batch_size=3,
            bias_tolerance=None,
            max_batch_size=d + 1,
            **SMALL,
        )
        assert X.shape == (3, d)


def test_acqf_maxiter_reaches_every_optimize_acqf_call_and_only_when_set(monkeypatch):
    import dataclasses

    import pytest

    from botorch_dp.optim.dp_gibo import DPGIBO
    from tests.optim.loop_helpers import nl_config

    seen = []

    def recording(*args, **kwargs):
        seen.append(dict(kwargs["options"]))
        return optimize_acqf(*args, **kwargs)

    monkeypatch.setattr(batches_module, "optimize_acqf", recording)
    base = nl_config(d=2, num_iterations=1, batch_size=3)
    DPGIBO(dataclasses.replace(base, batches=FixedBatches(3, search="greedy", maxiter=7))).ask()  # one search per point
    assert len(seen) == 3 and all(o["maxiter"] == 7 for o in seen)
    seen.clear()
    DPGIBO(base).ask()  # joint
    assert len(seen) == 1 and "maxiter" not in seen[0]  # default: BoTorch's own
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="acqf_maxiter"):
            dataclasses.replace(base, batches=FixedBatches(3, maxiter=bad))


def test_capped_search_stays_a_valid_batch_and_the_cap_binds():
    # with one L-BFGS-B iteration the batch is found from the best raw sample almost as is;
    # the uncapped search is at least as informative (same seed, same initial conditions)
    d = 3
    gp, theta, bounds = (
        empty_gp(d),
        torch.zeros(d, dtype=torch.float64),
        torch.tensor([[-1.0] * d, [1.0] * d], dtype=torch.float64),
    )
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    capped = optimize_batch(gp, theta, bounds, 2, gen(), num_restarts=2, raw_samples=16, maxiter=1)
    free = optimize_batch(gp, theta, bounds, 2, gen(), num_restarts=2, raw_samples=16)
    acqf = qGradientInformation(gp, theta)
    assert capped.shape == free.shape == (2, d)
    assert ((capped >= bounds[0]) & (capped <= bounds[1])).all()
    assert float(acqf(free.unsqueeze(0))) >= float(acqf(capped.unsqueeze(0))) - 1e-12
    assert not torch.equal(capped, free)


def _gp_with_points(d=3, N=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    theta, bounds = setting(d)
    D = theta + 0.4 * (2 * torch.rand(N, d, generator=g, dtype=torch.float64) - 1)
    return GradientGP(D, rbf_kernel(d), 1e-4), theta, bounds


def test_moved_batch_is_the_last_batch_shifted_by_the_last_step():
    X = torch.arange(12.0, dtype=torch.float64).reshape(6, 2)
    iterates = (
        torch.zeros(2, dtype=torch.float64),
        torch.tensor([1.0, -1.0], dtype=torch.float64),
        torch.tensor([1.5, 0.0], dtype=torch.float64),
    )
    moved = moved_batch(X, (2, 4), iterates)
    torch.testing.assert_close(moved, X[2:] + torch.tensor([0.5, 1.0], dtype=torch.float64))
    assert moved_batch(X, (), iterates[:1]) is None  # before the first step
    assert moved_batch(X, (6, 0), iterates) is None  # the last batch was empty


def test_fast_search_starts_from_the_given_batch_without_raw_samples_and_improves_it(monkeypatch):
    from botorch.optim import initializers

    gp, theta, bounds = _gp_with_points()
    start = theta + 0.05 * torch.randn(4, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    calls = []
    monkeypatch.setattr(initializers, "gen_batch_initial_conditions", lambda *a, **k: calls.append(1))
    out = optimize_batch(
        gp,
        theta,
        bounds,
        4,
        torch.Generator().manual_seed(0),
        num_restarts=1,
        raw_samples=32,
        start=start,
        speed=FAST,
    )
    assert calls == []  # no random initial conditions were drawn
    acqf = qGradientInformation(gp, theta)
    assert ((out >= bounds[0]) & (out <= bounds[1])).all()
    assert float(acqf(out.unsqueeze(0))) > float(acqf(start.unsqueeze(0))) + 1e-6


def test_speeds_search_the_same_acquisition_and_restore_the_thread_count(monkeypatch):
    # same seed and random start: the closed-form and the autograd gradient give the same batch up to
    # round-off in L-BFGS-B's path, so the two batches are (almost) equally informative

    gp, theta, bounds = _gp_with_points(N=10, seed=5)
    gradients, threads = [], torch.get_num_threads()
    original = batches_module.qGradientInformation

    def recording(*args, **kwargs):
        acqf = original(*args, **kwargs)
        gradients.append((kwargs["gradient"], acqf._closed_form, torch.get_num_threads()))
        return acqf

    monkeypatch.setattr(batches_module, "qGradientInformation", recording)
    runs = {
        speed: optimize_batch(
            gp,
            theta,
            bounds,
            3,
            torch.Generator().manual_seed(1),
            num_restarts=2,
            raw_samples=32,
            speed=SEARCH_SPEEDS[speed],
            maxiter=60,
        )
        for speed in ("reference", "fast")
    }
    assert [g[:2] for g in gradients] == [("autograd", False), ("auto", True)]
    assert torch.get_num_threads() == threads
    acqf = original(gp, theta)
    values = {k: float(acqf(v.unsqueeze(0))) for k, v in runs.items()}
    assert values["fast"] == pytest.approx(values["reference"], rel=1e-4)


def test_search_batch_passes_the_moved_batch_only_when_fast_joint_and_of_the_right_size(monkeypatch):

    seen = []
    monkeypatch.setattr(
        batches_module,
        "optimize_batch",
        lambda *a, **k: seen.append((a[3], k["start"], k["speed"])) or torch.zeros(a[3], 2, dtype=torch.float64),
    )
    gp, (theta, bounds) = empty_gp(2), setting(2)
    prev = torch.full((3, 2), 2.4, dtype=torch.float64)
    common = dict(bias_tolerance=None, max_batch_size=3, num_restarts=1, raw_samples=8, previous=prev)
    search_batch(gp, theta, bounds, torch.Generator(), batch_search=JOINT, batch_size=3, speed=FAST, **common)
    search_batch(gp, theta, bounds, torch.Generator(), batch_search=JOINT, batch_size=3, speed=REFERENCE, **common)
    search_batch(gp, theta, bounds, torch.Generator(), batch_search=JOINT, batch_size=2, speed=FAST, **common)
    assert seen[0][1] is prev and seen[0][2] is FAST
    assert seen[1][1] is None and seen[1][2] is REFERENCE
    assert seen[2][1] is None  # a batch of another size is not a start


def test_acqf_speed_reaches_the_search_and_is_checked(monkeypatch):
    import dataclasses

    from botorch_dp.optim.dp_gibo import DPGIBO
    from tests.optim.loop_helpers import nl_config

    seen = []
    original = batches_module.optimize_batch

    def recording(*args, **kwargs):
        seen.append((kwargs["speed"], kwargs["start"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(batches_module, "optimize_batch", recording)
    base = nl_config(d=2, num_iterations=3, batch_size=3, acqf_speed="fast")
    opt = DPGIBO(base)
    for _ in range(2):
        X = opt.ask()
        opt.tell(X, torch.rand(3, 5, dtype=torch.float64))
    opt.ask()
    assert [s for s, _ in seen] == [FAST] * 3 and all(s is FAST for s, _ in seen)
    assert seen[0][1] is None  # nothing to move at the first step
    expected = moved_batch(opt.state.X, opt.state.batch_sizes, opt.state.iterates)
    torch.testing.assert_close(seen[2][1], expected)
    reference = dataclasses.replace(base.batches, speed="reference")
    assert DPGIBO(dataclasses.replace(base, batches=reference)).options.batches.speed == "reference"
    with pytest.raises(ValueError, match="acqf_speed"):
        dataclasses.replace(base.batches, speed="quick")


def test_warm_fast_search_is_capped_at_warm_maxiter_and_nothing_else_is(monkeypatch):
    # the cap reaches optimize_acqf only for a fast search from a start; the smaller of the two caps wins

    seen = []

    def recording(*args, **kwargs):  # records the cap; the search itself is not needed here
        seen.append(kwargs["options"].get("maxiter"))
        return torch.zeros(kwargs["q"], 3, dtype=torch.float64), torch.zeros(())

    monkeypatch.setattr(batches_module, "optimize_acqf", recording)
    monkeypatch.setattr(batches_module, "WARM_MAXITER", 3)
    gp, theta, bounds = _gp_with_points()
    start = theta + 0.05 * torch.randn(4, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for maxiter, start_, speed in [
        (None, start, "fast"),
        (50, start, "fast"),
        (2, start, "fast"),
        (None, None, "fast"),
        (50, None, "fast"),
        (None, start, "reference"),
    ]:
        optimize_batch(
            gp,
            theta,
            bounds,
            4,
            torch.Generator().manual_seed(0),
            num_restarts=1,
            raw_samples=8,
            start=start_,
            speed=SEARCH_SPEEDS[speed],
            maxiter=maxiter,
        )
    assert seen == [3, 3, 2, None, 50, None]
    seen.clear()
    monkeypatch.setattr(batches_module, "WARM_MAXITER", None)  # no warm cap: maxiter alone
    optimize_batch(
        gp,
        theta,
        bounds,
        4,
        torch.Generator().manual_seed(0),
        num_restarts=1,
        raw_samples=8,
        start=start,
        speed=FAST,
        maxiter=50,
    )
    assert seen == [50]


def test_warm_cap_bounds_the_evaluations_and_keeps_the_start_s_gain(monkeypatch):
    # the capped run evaluates the acquisition fewer times than the uncapped one from the same start; its batch
    # is still better than the start, and no better than the uncapped one

    gp, theta, bounds = _gp_with_points(d=4, N=12, seed=3)
    start = theta + 0.1 * torch.randn(6, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    acqf = qGradientInformation(gp, theta)
    calls = []
    original = qGradientInformation.forward

    def counting(self, X):
        calls.append(1)
        return original(self, X)

    monkeypatch.setattr(qGradientInformation, "forward", counting)
    out = {}
    for cap in (2, None):
        monkeypatch.setattr(batches_module, "WARM_MAXITER", cap)
        calls.clear()
        out[cap] = optimize_batch(
            gp,
            theta,
            bounds,
            6,
            torch.Generator().manual_seed(0),
            num_restarts=1,
            raw_samples=8,
            start=start,
            speed=FAST,
        )
        out[cap, "calls"] = len(calls)
    value = {k: float(acqf(out[k].unsqueeze(0))) for k in (2, None)}
    assert 3 <= out[2, "calls"] < out[None, "calls"]
    assert value[2] > float(acqf(start.clamp(bounds[0], bounds[1]).unsqueeze(0))) + 1e-9
    assert value[None] >= value[2] - 1e-9


def test_each_search_kind_runs_its_search_for_fixed_and_adaptive_batches(monkeypatch):
    # the four (kind, rule) pairs reach the four searches with the size and tolerance Alg. 1 and 2 ask for;
    # only a joint search is started from the moved batch (a greedy one picks each point from scratch)
    seen = []

    def recording(name):
        def search(gp, theta, bounds, *args, **kwargs):
            numbers = tuple(a for a in args if not isinstance(a, torch.Generator))
            seen.append((name, numbers, kwargs.get("tolerance"), kwargs.get("start")))
            return torch.zeros(0, 2, dtype=torch.float64)

        return search

    for name in ("optimize_batch", "greedy_batch", "adaptive_joint_batch"):
        monkeypatch.setattr(batches_module, name, recording(name))
    gp, (theta, bounds) = empty_gp(2), setting(2)
    prev = torch.full((3, 2), 2.4, dtype=torch.float64)
    common = dict(batch_size=3, max_batch_size=5, num_restarts=1, raw_samples=8, speed=FAST, previous=prev)
    for kind in ("joint", "greedy"):
        for tolerance in (None, 0.2):
            search = BATCH_SEARCHES[kind]
            search_batch(gp, theta, bounds, torch.Generator(), batch_search=search, bias_tolerance=tolerance, **common)
    assert [entry[:3] for entry in seen] == [
        ("optimize_batch", (3,), None),
        ("adaptive_joint_batch", (0.2, 5), None),
        ("greedy_batch", (3,), None),
        ("greedy_batch", (5,), 0.2),
    ]
    assert seen[0][3] is prev and seen[1][3] is prev and seen[2][3] is None and seen[3][3] is None


# ----------------------------------------------------------------- a user's batch rule plugs in (issue 42)
@register("batches", "test_random_box")
class RandomBox(UserStrategy):
    r"""A user's batch rule (no class of the package): ``size`` points uniform in the box of half-width
    ``radius`` around ``θ_t``, cut to the bounds, from the run's public search generator."""

    tolerance = None

    def __init__(self, size: int = 2, radius: float = 0.25) -> None:
        self.size, self.radius = int(size), float(radius)

    def params(self) -> dict[str, Any]:
        return {"size": self.size, "radius": self.radius}

    def per_step(self, default: int) -> int:
        return self.size

    def select(
        self,
        gp: GradientGP,
        theta: torch.Tensor,
        bounds: torch.Tensor,
        generator: torch.Generator,
        *,
        basis: torch.Tensor | None,
        default: int,
        num_restarts: int,
        raw_samples: int,
        previous: torch.Tensor | None = None,
    ) -> torch.Tensor:
        low = torch.maximum(theta - self.radius, bounds[0])
        high = torch.minimum(theta + self.radius, bounds[1])
        u = torch.rand(self.size, theta.shape[0], generator=generator, dtype=theta.dtype)
        return low + (high - low) * u


def test_a_users_batch_rule_runs_in_its_box_and_resumes_bit_identically(tmp_path):
    rule: BatchRule = RandomBox(2, 0.25)  # mypy checks the protocol's signatures here
    assert type(rule).__mro__ == (RandomBox, UserStrategy, object)
    config = config_with(_settings({"num_iterations": 3}), batches=rule)
    assert config.batches is rule
    whole, resumed, opt = run_and_resume(config, tmp_path, stop_after=1)  # the search generator resumes too
    assert resumed == whole and type(opt.config.batches) is RandomBox  # rebuilt from its spec
    release = opt.result().release
    assert release.batch_sizes == [2, 2, 2]
    points = release.evaluation_points.reshape(3, 2, -1)
    for theta, batch in zip(release.iterates[:3], points, strict=True):
        assert ((batch - theta).abs() <= 0.25).all()
    assert len({tuple(p.tolist()) for p in release.evaluation_points}) == 6  # drawn afresh each step
