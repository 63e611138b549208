r"""Fuzz set (issue 13 item 9): malformed losses, configs and call sequences.

After every refused call the optimizer's state is bit-identical to before, nothing was
released (ledger unchanged), the asked points are still pending, and a corrected call
then works. Derandomized and small (d = 2, n = 6) so that CI is deterministic and fast.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import botorch_dp.optim.options.batches as batches_module
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.subspace import FixedSubspace

from .loop_helpers import nl_config, normal_location
from .state_helpers import same, snapshot

D, N, T = 2, 6, 2
FUZZ = settings(
    max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
_, OBJECTIVE = normal_location(n=N, d=D)


@pytest.fixture(autouse=True)
def cheap_batches(monkeypatch):
    r"""Uniform points in the local box from the (public) search generator instead of
    ``optimize_acqf``: the fuzz set is about input handling and state, and must be fast."""

    def search_batch(gp, theta, local_box, generator, *, batch_size, **_):
        u = torch.rand(batch_size, theta.shape[0], generator=generator, dtype=torch.float64)
        return local_box[0] + (local_box[1] - local_box[0]) * u

    monkeypatch.setattr(batches_module, "search_batch", search_batch)


def config(**kw):
    base = dict(d=D, privacy_mu=1.0, clip_bound=3.0, num_iterations=T, seed=0)
    base.update(kw)
    return nl_config(**base)


def fresh(iterations_done: int = 0) -> tuple[DPGIBO, torch.Tensor]:
    r"""An optimizer after ``iterations_done`` steps with a batch asked (pending)."""
    opt = DPGIBO(config())
    for _ in range(iterations_done):
        X = opt.ask()
        opt.tell(X, OBJECTIVE(X))
    return opt, opt.ask()


def assert_refused_without_effect(opt, X, call):
    before = snapshot(opt)
    with pytest.raises((ValueError, RuntimeError)):
        call()
    assert same(snapshot(opt), before)  # bit-identical state, ledger, generators
    assert opt.state.pending is not None and torch.equal(opt.state.pending, X)  # still pending
    assert torch.equal(opt.ask(), X)
    iteration = opt.iteration
    assert opt.tell(X, OBJECTIVE(X)).iteration == iteration + 1  # the corrected call works


# ---------------------------------------------------------------- malformed losses
NONFINITE = st.sampled_from([math.nan, math.inf, -math.inf])


@st.composite
def malformed_losses(draw, q: int, first: bool):
    r"""A value that ``tell`` must refuse for a ``q x N`` batch (``first``: no tell yet, so
    any ``n >= 1`` is still allowed)."""
    good = OBJECTIVE(torch.zeros(q, D, dtype=torch.float64))
    kind = draw(
        st.sampled_from(
            ["nonfinite", "shape", "users", "dtype", "numpy_nonfinite", "list_shape", "nested_junk", "scalar"]
        )
    )
    if kind == "nonfinite":
        losses = good.clone()
        for _ in range(draw(st.integers(1, 3))):
            losses[draw(st.integers(0, q - 1)), draw(st.integers(0, N - 1))] = draw(NONFINITE)
        losses.requires_grad_(draw(st.booleans()))
        return losses
    if kind == "shape":
        shape = draw(st.sampled_from([(q + 1, N), (q - 1, N), (N, q), (q, N, 1), (q * N,), (1, q, N)]))
        return torch.zeros(shape, dtype=torch.float64)
    if kind == "users":
        n = 0 if first else draw(st.sampled_from([0, 1, N - 1, N + 1, 2 * N]))  # wrong n after the first tell
        return torch.zeros(q, n, dtype=torch.float64)
    if kind == "dtype":
        dtype = draw(
            st.sampled_from([torch.int64, torch.int32, torch.bool, torch.complex64, torch.complex128, torch.uint8])
        )
        return good.to(dtype)
    if kind == "numpy_nonfinite":
        array = good.numpy().copy()
        array[draw(st.integers(0, q - 1)), draw(st.integers(0, N - 1))] = draw(NONFINITE)
        return array
    if kind == "list_shape":
        return good.tolist()[: q - 1] if q > 1 else [[0.0] * (N + 1)]
    if kind == "nested_junk":
        return draw(st.sampled_from([None, "losses", object(), [[1.0, "a"]], [[1.0], [2.0, 3.0]], {"a": 1}]))
    return draw(st.sampled_from([0.0, torch.tensor(1.0), np.float64(2.0)]))


@FUZZ
@given(data=st.data(), iterations_done=st.integers(0, 1))
def test_malformed_losses_change_nothing(data, iterations_done):
    opt, X = fresh(iterations_done)
    bad = data.draw(malformed_losses(X.shape[0], first=iterations_done == 0))
    assert_refused_without_effect(opt, X, lambda: opt.tell(X, bad))


@FUZZ
@given(data=st.data())
def test_accepted_loss_formats_are_copied(data):
    r"""numpy arrays, lists, float32 and requires_grad losses are accepted and copied."""
    opt, X = fresh()
    good = OBJECTIVE(X)
    kind = data.draw(st.sampled_from(["numpy", "list", "float32", "requires_grad"]))
    value = {
        "numpy": lambda: good.numpy().copy(),
        "list": lambda: good.tolist(),
        "float32": lambda: good.float(),
        "requires_grad": lambda: good.clone().requires_grad_(True) * 1.0,
    }[kind]()
    opt.tell(X, value)
    expected = torch.as_tensor(good.float() if kind == "float32" else good, dtype=torch.float64)
    assert torch.equal(torch.cat(opt.state.blocks), expected) and not torch.cat(opt.state.blocks).requires_grad
    if kind == "numpy":
        value[:] = 0.0
    assert torch.equal(torch.cat(opt.state.blocks), expected)


# ---------------------------------------------------------------- malformed configs
INVALID = {
    "num_iterations": [0, -1, 1.5, math.nan, math.inf, True, "3", None],
    "privacy_mu": [0.0, -1.0, math.nan, -math.inf, "1"],  # None: the default (or the target's μ)
    "epsilon": [0.0, -1.0, math.nan, "1", 1.0],  # 1.0: without delta, or next to privacy_mu
    "delta": [1e-5, 0.0, 1.0],  # without epsilon
    "clip_bound": [0.0, -1.0, math.nan, math.inf, None],
    "step_size": [0.0, -0.1, math.nan, math.inf, "0.1"],
    "batch_size": [0, -2, 2.5, math.nan, True],
    "max_batch_size": [0, -1, 1.5],
    "noise_variance": [-1e-6, math.nan, math.inf, "0"],
    "target_delta": [0.0, 1.0, -0.1, math.nan, 2.0],
    "validation_mu_budget": [0.0, -1.0, math.nan],
    "num_restarts": [0, -1, 2.5, math.nan],
    "raw_samples": [0, -3, 0.5, math.inf],
    "user_chunk_size": [0, -1, 2.5, math.nan, math.inf, False],
    "jitter": [-1e-9, math.nan, math.inf],
    "seed": [-1, 0.5, "0", math.nan, True],
    "search_radius": [0.0, -0.5, math.nan, torch.tensor([0.5, math.nan]), torch.tensor([0.5, 0.5, 0.5])],
    "theta0": [torch.tensor([math.nan, 0.0]), torch.tensor([0.0, math.inf]), torch.tensor([10.0, 0.0]), torch.zeros(3)],
    "bias_tolerance": [0.0, -1.0, math.nan, math.inf],
    "nonfinite_losses": ["zero", "ignore", None, 0],
    "step_rule": ["adam", None],
    "batch_search": ["random", None],
    "preconditioner": ["noisy", "private", "exact"],  # only with step_rule="adagrad_full"
    "preconditioner_mu_fraction": [0.5, 0.0],  # only with preconditioner="private"
    "subspace": [torch.eye(2), "V", FixedSubspace(torch.eye(3))],
}
FIELD_NAMES = sorted(INVALID)


@FUZZ
@given(data=st.data())
def test_invalid_config_values_are_refused_naming_the_field(data):
    field = data.draw(st.sampled_from(FIELD_NAMES))
    value = data.draw(st.sampled_from(INVALID[field]))
    extra = {"batch_size": None} if field in ("bias_tolerance", "max_batch_size") else {}
    with pytest.raises(ValueError, match=field):
        config(**extra, **{field: value})


# ---------------------------------------------------------------- call sequences
@FUZZ
@given(
    ops=st.lists(st.sampled_from(["ask", "tell", "tell_other", "tell_before", "bad_losses"]), min_size=1, max_size=8)
)
def test_call_sequences_never_corrupt_the_state(ops):
    r"""Random sequences of ask / tell / tell with other points / malformed tells: every
    refused call leaves the state bit-identical; accepted ones advance by one step."""
    opt = DPGIBO(config())
    for op in ops + ["ask", "tell"] * T:
        pending = opt.state.pending
        before = snapshot(opt)
        if op == "ask":
            if opt.is_done:
                with pytest.raises(RuntimeError, match="finished"):
                    opt.ask()
                assert same(snapshot(opt), before)
            else:
                X = opt.ask()
                assert pending is None or torch.equal(X, pending)  # asking twice: same points
            continue
        if pending is None:  # tell before ask, or after the run is done
            with pytest.raises(RuntimeError):
                opt.tell(torch.zeros(3, D, dtype=torch.float64), torch.zeros(3, N, dtype=torch.float64))
            assert same(snapshot(opt), before)
            continue
        if op == "tell":
            iteration = opt.iteration
            assert opt.tell(pending, OBJECTIVE(pending)).iteration == iteration + 1
            assert opt.state.pending is None
            continue
        if op == "tell_other":
            call = lambda pending=pending: opt.tell(pending + 0.25, OBJECTIVE(pending))  # noqa: E731
        elif op == "tell_before":
            call = lambda pending=pending: opt.tell(pending[:-1], OBJECTIVE(pending[:-1]))  # noqa: E731
        else:
            call = lambda pending=pending: opt.tell(pending, OBJECTIVE(pending)[:, :0])  # noqa: E731
        with pytest.raises(ValueError):
            call()
        assert same(snapshot(opt), before) and torch.equal(opt.state.pending, pending)
    assert opt.is_done and opt.ledger.validation.mu() == pytest.approx(1.0)
