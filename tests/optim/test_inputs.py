r"""Issue 13 (items 1, 2, 7): seeds, non-finite losses and the validation gaps of DP-GIBO.

Each validation gap: (a) a ValueError whose message names the argument, (b) nothing was
released (no DPGIBO built, or its state, ledger and pending points unchanged), (c) the
corrected call works. The config's own gaps and its target (ε, δ) are in test_config.py.
"""

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest
import torch

import botorch_dp.optim.options.batches as batches_module
from botorch_dp import PrivacyWarning
from botorch_dp.optim.checkpoint import json_fingerprint
from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.utils import child_seeds

from .loop_helpers import nl_config, normal_location, resumed_each
from .state_helpers import same, snapshot

D, N = 2, 10


def config(**kw):
    base = dict(d=D, privacy_mu=1.0, clip_bound=3.0, num_iterations=3, seed=0)
    base.update(kw)
    return nl_config(**base)


def asked(**kw):
    r"""An optimizer with points pending, its objective and a snapshot of its state."""
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(config(**kw))
    X = opt.ask()
    return opt, X, objective


def assert_nothing_released(opt, before):
    assert same(snapshot(opt), before)
    assert opt.ledger.validation.mu() == before["validation_mu"]


# ---------------------------------------------------------------- seeds (item 2)
def test_default_seed_is_none_and_draws_noise_from_os_entropy():
    assert DPGIBOConfig.__dataclass_fields__["seed"].default is None
    _, objective = normal_location(n=N, d=D)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # no warning without a seed
        a, b = DPGIBO(config(seed=None)), DPGIBO(config(seed=None))
    assert a.generators.noise is None and b.generators.noise is None  # the mechanism uses os.urandom
    # the public search stream is seeded from OS entropy too: two runs differ
    assert not torch.equal(a.generators.search.get_state(), b.generators.search.get_state())
    X = a.ask()
    b.state = dataclasses.replace(b.state, pending=X.clone())  # same points and data, so only the noise can differ
    a.tell(X, objective(X))
    b.tell(X, objective(X))
    assert not torch.equal(a.result().release.released_gradients, b.result().release.released_gradients)


def test_explicit_seed_warns_once_per_construction_and_reproduces():
    cfg = config(seed=7)
    with pytest.warns(PrivacyWarning, match="reproducible") as record:
        a = DPGIBO(cfg)
    assert sum(issubclass(w.category, PrivacyWarning) for w in record) == 1
    with pytest.warns(PrivacyWarning):
        b = DPGIBO(cfg)
    _, objective = normal_location(n=N, d=D)
    ra, rb = a.run(objective, progress=False), b.run(objective, progress=False)
    assert torch.equal(ra.release.released_gradients, rb.release.released_gradients)
    assert torch.equal(ra.release.evaluation_points, rb.release.evaluation_points)


def test_seeded_noise_and_search_are_separate_child_streams():
    with pytest.warns(PrivacyWarning):
        opt = DPGIBO(config(seed=5))
    with pytest.warns(PrivacyWarning):
        expected_noise = noise_generator(5, stream=0)
    assert torch.equal(opt.generators.noise.get_state(), expected_noise.get_state())
    expected_search = torch.Generator().manual_seed(child_seeds([5, 1], 1)[0])
    assert torch.equal(opt.generators.search.get_state(), expected_search.get_state())
    assert not torch.equal(opt.generators.noise.get_state(), opt.generators.search.get_state())


def test_non_private_run_with_a_seed_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        opt = DPGIBO(config(privacy_mu=math.inf, seed=3))  # no noise is drawn at all
    assert opt.generators.noise is None


def test_seed_must_be_a_non_negative_integer():
    for bad in (-1, 1.5, "0", True, float("nan")):
        with pytest.raises(ValueError, match="seed"):
            config(seed=bad)
    assert config(seed=np.int64(3)).seed == 3 and type(config(seed=torch.tensor(3)).seed) is int


def test_privacy_warning_is_exported_at_top_level():
    import botorch_dp

    assert "PrivacyWarning" in botorch_dp.__all__ and issubclass(botorch_dp.PrivacyWarning, UserWarning)


# ---------------------------------------------------------------- non-finite losses (item 1)
def test_nonfinite_losses_are_refused_by_default_before_any_release():
    opt, X, objective = asked()
    before = snapshot(opt)
    losses = objective(X)
    losses[1, 4] = float("inf")
    with pytest.raises(ValueError, match=r"point\(s\) \[1\].*reveals that some user's loss") as err:
        opt.tell(X, losses)
    assert "nonfinite_losses='zero_user'" in str(err.value)
    assert_nothing_released(opt, before)
    opt.tell(X, objective(X))
    assert opt.iteration == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_zero_user_release_equals_the_release_with_that_users_losses_zeroed(bad):
    _, objective = normal_location(n=N, d=D)
    runs = {}
    for name in ("nan", "zeros"):
        opt = DPGIBO(config(nonfinite_losses="zero_user"))
        for _ in range(2):  # the second step uses both batches: user 0 stays at 0
            X = opt.ask()
            losses = objective(X)
            if name == "zeros":
                losses[:, 0] = 0.0  # D': user 0's losses replaced by zeros
            elif opt.iteration == 0:
                losses[1, 0] = bad  # D: one non-finite loss of user 0
            opt.tell(X, losses)
        runs[name] = opt
    a, b = runs["nan"].result().release, runs["zeros"].result().release
    assert torch.isfinite(a.released_gradients).all()
    assert same(a.released_gradients, b.released_gradients) and same(a.iterates, b.iterates)
    assert a.guarantee == b.guarantee  # n unchanged: same sensitivity, noise and μ
    assert math.isclose(a.guarantee.noise_std, 2 * 3.0 * math.sqrt(3) / (N * 1.0), rel_tol=1e-15)


def test_zero_user_mechanism_masks_users_with_any_nonfinite_loss():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 4, generator=g, dtype=torch.float64)
    Y = torch.randn(4, 6, generator=g, dtype=torch.float64)
    Y_bad, Y_zero = Y.clone(), Y.clone()
    Y_bad[2, 1], Y_bad[0, 4] = float("nan"), float("-inf")
    Y_zero[:, [1, 4]] = 0.0

    def mech():
        return GaussianGradientMechanism(
            clip_bound=1.0,
            num_users=6,
            privacy_mu=1.0,
            num_steps=2,
            generator=torch.Generator().manual_seed(1),
            chunk_size=4,
        )

    with pytest.raises(ValueError, match="not finite"):
        mech().release(A, Y_bad)
    got = mech().release(A, Y_bad, nonfinite="zero_user", diagnostics=True)
    want = mech().release(A, Y_zero, diagnostics=True)
    assert same(got.gradient, want.gradient) and got.cost == want.cost
    assert same(got.diagnostics.unnoised_gradient, want.diagnostics.unnoised_gradient)


def test_nonfinite_losses_option_is_checked():
    with pytest.raises(ValueError, match="nonfinite_losses"):
        config(nonfinite_losses="ignore")


# ---------------------------------------------------------------- tell copies, empty first batch
def test_tell_copies_the_callers_losses():
    opt, X, objective = asked()
    buffer = objective(X)
    kept = buffer.clone()
    opt.tell(X, buffer)
    released = opt.result().release.released_gradients.clone()
    buffer.fill_(1e6)  # the caller reuses its output buffer
    assert torch.equal(torch.cat(list(opt.state.blocks)), kept)
    assert torch.equal(opt.result().release.released_gradients, released)
    # also for numpy input (torch.as_tensor would share its memory)
    X = opt.ask()
    array = objective(X).numpy().copy()
    opt.tell(X, array)
    array[:] = 1e6
    assert torch.equal(torch.cat(list(opt.state.blocks))[-X.shape[0] :], objective(X))


def test_losses_with_requires_grad_are_detached_before_the_release(tmp_path):
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(config(), checkpoint_dir=tmp_path)
    X = opt.ask()
    w = torch.ones((), dtype=torch.float64, requires_grad=True)
    info = opt.tell(X, objective(X) * w)  # a non-leaf tensor: used to fail in the checkpoint
    assert info.iteration == 1 and not torch.cat(list(opt.state.blocks)).requires_grad
    assert not opt.result().release.released_gradients.requires_grad
    opt.close()
    resumed = DPGIBO.resume(tmp_path)
    assert resumed.iteration == 1 and torch.equal(
        torch.cat(list(resumed.state.blocks)), torch.cat(list(opt.state.blocks))
    )


def test_empty_first_adaptive_batch_uses_the_real_number_of_users(monkeypatch):
    _, objective = normal_location(n=N, d=D)
    real_select = batches_module.search_batch
    calls = []

    def first_empty(gp, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            return torch.empty(0, D, dtype=torch.float64)
        return real_select(gp, *args, **kwargs)

    monkeypatch.setattr(batches_module, "search_batch", first_empty)
    opt = DPGIBO(config(batch_size=None, bias_tolerance=0.5, max_batch_size=3, num_iterations=2))
    result = opt.run(objective, progress=False)
    assert result.release.batch_sizes[0] == 0 and opt.num_users == N
    assert math.isclose(result.release.guarantee.noise_std, 2 * 3.0 * math.sqrt(2) / (N * 1.0), rel_tol=1e-15)
    # an objective that cannot say n on an empty batch is refused before any release
    monkeypatch.setattr(batches_module, "search_batch", lambda *a, **k: torch.empty(0, D, dtype=torch.float64))
    opt = DPGIBO(config(batch_size=None, bias_tolerance=0.5, max_batch_size=3, num_iterations=2))

    def no_empty(X):
        if X.shape[0] == 0:
            raise IndexError("empty")
        return objective(X)

    with pytest.raises(ValueError, match="first batch is empty"):
        opt.run(no_empty, progress=False)
    assert opt.iteration == 0 and opt.ledger.validation.mu() == 0.0


# ---------------------------------------------------------------- tell gaps (item 7)
TELL_GAPS = [
    ("losses", lambda L: L.tolist()[:-1], "losses"),  # a list with one point missing
    ("losses", lambda L: [[1.0, 2.0], [3.0]], "losses"),  # ragged
    ("losses", lambda L: "losses", "losses"),
    ("losses", lambda L: None, "losses"),
    ("losses", lambda L: L.to(torch.complex128), "floating point"),
    ("losses", lambda L: L.to(torch.int64), "floating point"),
    ("losses", lambda L: L > 0, "floating point"),
    ("losses", lambda L: L[:, :0], "user"),
    ("losses", lambda L: L[None], "shape"),
]


@pytest.mark.parametrize("name,make,match", TELL_GAPS, ids=[str(i) for i in range(len(TELL_GAPS))])
def test_malformed_losses_are_refused_before_anything(name, make, match):
    opt, X, objective = asked()
    losses = objective(X)
    before = snapshot(opt)
    with pytest.raises(ValueError, match=match):
        opt.tell(X, make(losses))
    assert_nothing_released(opt, before)
    assert torch.equal(opt.ask(), X)
    assert opt.tell(X, losses).iteration == 1


def test_malformed_points_are_refused_before_anything():
    opt, X, objective = asked()
    before = snapshot(opt)
    for bad in ("x", None, X + 1, X[:1], torch.full_like(X, float("nan"))):
        with pytest.raises(ValueError, match="points"):
            opt.tell(bad, objective(X))
    assert_nothing_released(opt, before)
    assert opt.tell(X.numpy(), objective(X)).iteration == 1  # numpy points are fine


# ---------------------------------------------------------------- per-user losses (issue 16 item 4)
@pytest.mark.parametrize("reduce", ["mean", "single_user"])
def test_fewer_than_two_users_are_refused_with_an_explanation(reduce):
    opt, X, objective = asked()
    losses = objective(X)
    bad = losses.mean(-1, keepdim=True) if reduce == "mean" else losses[:, :1]
    before = snapshot(opt)
    with pytest.raises(ValueError, match=r"1 column\(s\), but a private run needs per-user losses") as info:
        opt.tell(X, bad)
    assert "mean loss" in str(info.value) and "reduction='none'" in str(info.value)
    assert_nothing_released(opt, before)
    with pytest.raises(ValueError, match="per-user losses"):
        DPGIBO(config()).run(lambda X: objective(X).mean(-1, keepdim=True), progress=False)
    assert opt.tell(X, losses[:, :2]).iteration == 1  # two users are enough
    # a non-private run (μ = inf) may optimise one scalar objective
    free = DPGIBO(config(privacy_mu=math.inf))
    Xf = free.ask()
    assert free.tell(Xf, objective(Xf).mean(-1, keepdim=True)).iteration == 1


def test_max_evaluations_bounds_what_a_run_asks_for():
    _, objective = normal_location(n=N, d=D)
    fixed = config(num_iterations=3, batch_size=2)
    assert fixed.max_evaluations == 6 == len(DPGIBO(fixed).run(objective, progress=False).release.evaluation_points)
    assert config(num_iterations=3, batch_size=None).max_evaluations == 3 * (D + 1)  # default b = d + 1
    adaptive = config(num_iterations=3, batch_size=None, bias_tolerance=0.05, max_batch_size=4)
    assert adaptive.max_evaluations == 12
    asked_for = DPGIBO(adaptive).run(objective, progress=False).release.batch_sizes
    assert max(asked_for) <= 4 and sum(asked_for) <= 12


def test_checkpoint_written_before_the_target_fields_still_resumes(tmp_path):
    _, objective = normal_location(n=N, d=D)
    cfg = config(num_iterations=3)
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    opt.close()
    state_file = tmp_path / "state.json"
    state = json.loads(state_file.read_text())
    for name in ("epsilon", "delta"):  # what an older version wrote
        del state["config"][name]
    state["config_fingerprint"] = json_fingerprint(state["config"])  # of the config it wrote
    state_file.write_text(json.dumps(state))
    for resumed in resumed_each(tmp_path, None, cfg):
        assert resumed.iteration == 1 and resumed.config.epsilon is None and resumed.config.privacy_mu == 1.0
    with pytest.raises(ValueError, match="differs from the checkpoint"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, privacy_mu=None, epsilon=4.377, delta=1e-5))


def test_resume_accepts_another_user_chunk_size(tmp_path):
    # a memory knob, not a privacy setting: checkpoints written with the old default (4096)
    # resume under the new one (None: chosen from n and d), and vice versa
    _, objective = normal_location(n=N, d=D)
    cfg = config(num_iterations=3, user_chunk_size=4096)
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    opt.close()
    resumed = DPGIBO.resume(tmp_path, dataclasses.replace(cfg, user_chunk_size=None))
    assert resumed.iteration == 1 and resumed.config.user_chunk_size is None
    resumed.close()
    assert DPGIBO.resume(tmp_path).config.user_chunk_size == 4096
    with pytest.raises(ValueError, match="'num_iterations' differs from the checkpoint"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, user_chunk_size=None, num_iterations=4))
