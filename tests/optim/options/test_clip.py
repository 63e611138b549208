r"""Clip policies (botorch_dp/optim/options/clip.py): a fixed bound clips every step at ``B`` and keeps no
record; ``QuantileClip`` starts at ``B₀``, charges one count of ``μ_C/√T_max`` per step under the key
``step-t/clip`` and moves to ``B_{t+1} = B_t exp(−η_C(b̃_t/n − γ))`` from the released count (closed
form); ``QuantileClip`` wraps a ``FixedClip`` that makes the sum at the bound the state holds; each
strategy's ``spec()`` rebuilds it through the registry, and bad settings are refused naming the field.

The quantile update's arithmetic (``next_clip_bound``, ``QuantileClip.replay``): its
fixed point is the target quantile, closed forms; through ``DPGIBO`` with ``clip_bound="adaptive"``: the ledger's
totals in closed form, the released counts against an independent count, the budget filter, and checkpoint/resume
(bit-identical continuation, a changed setting or a damaged clip record refused; ``restore_state`` refuses a
counting policy that cannot replay its bounds). The count mechanism is tested in
``tests/privacy/mechanisms/test_counts.py``.
"""

import dataclasses
import json
import math
import warnings
from typing import Any

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options import ClipPolicy, DecayingClip, FixedClip, QuantileClip, from_spec, register
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit, recorded_mus
from botorch_dp.optim.options.clip import ClipState, ReplayedClip, next_clip_bound, restore_clip_state
from botorch_dp.optim.options.records import ResumeContext, RunRecords
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianClipCountMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from tests.optim.loop_helpers import nl_config, normal_location
from tests.optim.options.plugin import UserStrategy, run_and_resume
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import _settings


@pytest.mark.parametrize("strategy", [FixedClip(2.5), QuantileClip(2.0, 0.7, 0.1, 0.2), QuantileClip()])
def test_a_clip_policy_is_rebuilt_from_its_spec(strategy):
    assert from_spec("clip", json.loads(json.dumps(strategy.spec()))) == strategy
    assert strategy.key == f"clip:{strategy.name}"


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: FixedClip(0.0), r"clip_bound \(B\)"),
        (lambda: FixedClip(math.inf), r"clip_bound \(B\)"),
        (lambda: QuantileClip(bound=-1.0), r"clip_init \(B₀\)"),
        (lambda: QuantileClip(quantile=1.0), r"clip_quantile \(γ\)"),
        (lambda: QuantileClip(learning_rate=0.0), r"clip_learning_rate \(η_C\)"),
        (lambda: QuantileClip(fraction=0.0), r"clip_mu_fraction \(f_C\)"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()


def _users_and_weights(n=40):
    g = torch.Generator().manual_seed(3)
    losses = torch.randn(4, n, generator=g, dtype=torch.float64)
    W = torch.randn(2, 4, generator=g, dtype=torch.float64)
    return InMemoryUsers((losses,)), W


def test_a_fixed_bound_clips_every_step_at_b_and_keeps_no_record():
    users, W = _users_and_weights()
    clip = FixedClip(1.5)
    state = clip.initial_state()
    assert state == ClipState() and clip.current(state) == 1.5 and clip.mu_fraction is None
    summed = clip.aggregate(users, W, state)
    expected = users.clipped_sum(W, 1.5)
    assert torch.equal(summed.total, expected.total) and summed.bound == 1.5
    plan = RunPlan(num_iterations=4, iteration_cap=4, dim=2, num_users=40, split=BudgetSplit(1.0))
    assert clip.bound_parts(plan) == {} and clip.update(summed, plan, state, meter=None) is state


def test_a_quantile_clip_charges_its_count_and_moves_the_bound_in_closed_form():
    users, W = _users_and_weights()
    clip = QuantileClip(1.0, quantile=0.5, learning_rate=0.2, fraction=0.2)
    split = BudgetSplit(2.0, clip_fraction=0.2)
    plan = RunPlan(4, 4, 2, 40, split, generator=torch.Generator().manual_seed(0))
    count_mu = 2.0 * math.sqrt(0.2) / math.sqrt(4)
    parts = clip.bound_parts(plan)
    assert set(parts) == {"clip"} and parts["clip"].mu == pytest.approx(count_mu, rel=1e-12)
    ledger, state = PrivacyLedger(), clip.initial_state()
    for step in range(2):
        summed = clip.aggregate(users, W, state)
        assert summed.bound == state.bounds[-1]
        with ledger.charge(clip.bound_parts(plan), run_id="run", step=step) as meter:
            state = clip.update(summed, plan, state, meter)
        b, count = state.bounds[-2], state.counts[-1]
        assert state.bounds[-1] == pytest.approx(b * math.exp(-0.2 * (count / 40 - 0.5)), rel=1e-12)
    assert len(state.bounds) == 3 and len(state.counts) == 2
    assert clip.replay(state.counts, 40) == list(state.bounds)  # the replay is the update's own path, bit for bit
    assert ledger.validation.steps() == {
        ("run", "step-0000/clip"): pytest.approx(count_mu, rel=1e-12),
        ("run", "step-0001/clip"): pytest.approx(count_mu, rel=1e-12),
    }
    with pytest.raises(ValueError, match="needs a BudgetSplit with a clip_fraction"):
        clip.count_mu(RunPlan(4, 4, 2, 40, BudgetSplit(2.0)))


def test_a_quantile_clip_wraps_a_fixed_clip_that_sums_at_the_states_bound():
    users, W = _users_and_weights()
    clip = QuantileClip(1.0, quantile=0.5, learning_rate=0.2, fraction=0.2)
    assert not isinstance(clip, FixedClip) and clip.base == FixedClip(1.0)
    assert clip.initial_state() == ClipState(bounds=(1.0,))
    state = ClipState(bounds=(1.0, 0.4), counts=(12.0,))
    summed, expected = clip.aggregate(users, W, state), users.clipped_sum(W, 0.4)
    assert summed.bound == 0.4 == clip.current(state) == clip.base.current(state)
    assert torch.equal(summed.total, expected.total) and summed.within == expected.within


def test_a_stored_clip_state_is_checked_by_replaying_the_policys_counts():
    users, W = _users_and_weights()
    clip = QuantileClip(1.0, quantile=0.5, learning_rate=0.2, fraction=0.2)
    plan = RunPlan(4, 4, 2, 40, BudgetSplit(2.0, clip_fraction=0.2), generator=torch.Generator().manual_seed(0))
    ledger, state = PrivacyLedger(), clip.initial_state()
    for step in range(2):
        with ledger.charge(clip.bound_parts(plan), run_id="run", step=step) as meter:
            state = clip.update(clip.aggregate(users, W, state), plan, state, meter)
    entry = json.loads(json.dumps(clip.state_json(RunRecords(clip=state))))
    assert set(entry) == {"bounds", "counts"} and FixedClip().state_json(RunRecords()) == {}
    context = ResumeContext(steps=2, dim=2, num_users=40, plan=plan, recorded=recorded_mus(ledger, "run"), options=None)
    assert clip.restore_state(entry, RunRecords(), context) == RunRecords(clip=state)
    moved = dict(entry, counts=[entry["counts"][0], (state.counts[1] + 1.0).hex()])  # bounds no longer follow
    with pytest.raises(ValueError, match="does not follow from the first bound and the released counts"):
        clip.restore_state(moved, RunRecords(), context)
    doubled = {key: [2 * mu for mu in mus] for key, mus in context.recorded.items()}  # the ledger's μ differ
    with pytest.raises(ValueError, match="'strategies.clip.counts' disagrees with the ledger at step 0"):
        clip.restore_state(entry, RunRecords(), dataclasses.replace(context, recorded=doubled))
    with pytest.raises(ValueError, match="'strategies.clip.counts' must hold 2 values, got 1"):
        clip.restore_state(dict(entry, counts=entry["counts"][:1]), RunRecords(), context)
    with pytest.raises(ValueError, match=r"'strategies.clip': unknown keys \['bound'\]"):
        clip.restore_state(dict(entry, bound=entry["bounds"]), RunRecords(), context)
    with pytest.raises(ValueError, match="'strategies.clip' must be empty for FixedClip"):
        FixedClip().restore_state(entry, RunRecords(), context)
    # a policy that spends budget on counts but cannot replay its bounds from them is refused
    assert isinstance(clip, ReplayedClip) and not isinstance(FixedClip(), ReplayedClip)
    assert not isinstance(DecayingClip(), ReplayedClip)

    class Counting:
        mu_fraction = 0.2

        def initial_state(self) -> ClipState:
            return ClipState(bounds=(1.0,))

    counting: Any = Counting()
    with pytest.raises(ValueError, match="cannot recompute its bounds from them"):
        restore_clip_state(counting, entry, RunRecords(), context)


# ------------------------------------------------------------------------ adaptive clipping in the loop
D, N = 2, 40


@pytest.fixture(autouse=True)
def _quiet_seeds():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=PrivacyWarning)
        yield


def _cfg(**kw):
    base = dict(
        privacy_mu=1.0,
        clip_bound="adaptive",
        clip_init=2.0,
        num_iterations=3,
        seed=3,
        batch_size=3,
        num_restarts=1,
        raw_samples=16,
    )
    base.update(kw)
    return nl_config(d=D, **base)


def _run(cfg, steps=None, **kw):
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg, **kw)
    for _ in range(cfg.num_iterations if steps is None else steps):
        X = opt.ask()
        opt.tell(X, objective(X))
    return opt, objective


# ------------------------------------------------------------------------ the quantile update
@pytest.mark.parametrize("quantile", [0.3, 0.5, 0.9])
def test_update_converges_to_the_target_quantile_with_negligible_noise(quantile):
    g = torch.Generator().manual_seed(4)
    n = 1000
    A = torch.eye(3, dtype=torch.float64)
    Y = torch.randn(3, n, generator=g, dtype=torch.float64) * torch.rand(n, generator=g, dtype=torch.float64).mul(3)
    norms = Y.norm(dim=0)
    mech = GaussianClipCountMechanism(num_users=n, generator=torch.Generator().manual_seed(6))
    bound = 50.0  # far above every norm
    for _ in range(150):
        count = mech.release(A, Y, bound, 1e9).count  # noise std 1e-9
        bound = next_clip_bound(bound, count, n, quantile, 0.2)
    fraction = float((norms <= bound).float().mean())
    assert abs(fraction - quantile) <= 0.01  # the geometric update's fixed point is the γ-quantile
    lo, hi = torch.quantile(norms, torch.tensor([quantile - 0.01, quantile + 0.01], dtype=torch.float64))
    assert lo <= bound <= hi


def test_update_rule_closed_form():
    assert next_clip_bound(2.0, 30.0, 100, 0.5, 0.2) == 2.0 * math.exp(-0.2 * (0.3 - 0.5))
    assert QuantileClip(1.0, quantile=0.5, learning_rate=1.0).replay([10.0, 90.0], 100) == [
        1.0,
        math.exp(0.4),
        math.exp(0.4) * math.exp(-0.4),
    ]
    assert QuantileClip(3.0).replay([], None) == [3.0] == list(QuantileClip(3.0).initial_state().bounds)
    with pytest.raises(ValueError, match=r"Replaying 1 clip counts needs num_users \(n\)"):
        QuantileClip().replay([1.0], None)


# ------------------------------------------------------------------------ config
def test_config_fills_the_defaults_and_splits_the_budget():
    cfg = _cfg(clip_init=None)
    assert (cfg.clip_init, cfg.clip_quantile, cfg.clip_learning_rate, cfg.clip_mu_fraction) == (1.0, 0.5, 0.2, 0.1)
    mu_g, mu_c = cfg.mu_split.gradient_mu, cfg.mu_split.clip_mu
    assert mu_g == pytest.approx(math.sqrt(0.9)) and mu_c == pytest.approx(math.sqrt(0.1))
    assert math.hypot(mu_g, mu_c) == pytest.approx(1.0, rel=1e-15)
    assert nl_config(d=D).mu_split.clip_mu is None


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(clip_bound=1.0, clip_init=None, clip_quantile=0.5), "clip_quantile"),
        (dict(clip_bound=1.0), "clip_init"),
        (dict(clip_quantile=1.0), "clip_quantile"),
        (dict(clip_mu_fraction=0.0), "clip_mu_fraction"),
        (dict(clip_learning_rate=-0.1), "clip_learning_rate"),
        (dict(clip_init=math.inf), "clip_init"),
        (dict(privacy_mu=math.inf), "privacy_mu"),
        (dict(clip_bound="auto"), "clip_bound"),
    ],
)
def test_config_refuses_bad_adaptive_clip_settings_naming_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        _cfg(**kw)


# ------------------------------------------------------------------------ the loop
def test_ledger_total_equals_the_planned_budget_in_closed_form():
    mu, f, T = 0.7, 0.2, 3
    opt, _ = _run(_cfg(privacy_mu=mu, clip_mu_fraction=f, num_iterations=T))
    steps = {key: m for (run, key), m in opt.ledger.validation.steps().items() if run == opt.run_id}
    assert sorted(steps) == sorted(f"step-{t:04d}/{kind}" for t in range(T) for kind in ("grad", "clip"))
    for t in range(T):
        assert steps[f"step-{t:04d}/grad"] == pytest.approx(mu * math.sqrt((1 - f) / T), rel=1e-15)
        assert steps[f"step-{t:04d}/clip"] == pytest.approx(mu * math.sqrt(f / T), rel=1e-15)
    assert opt.ledger.validation.mu() == pytest.approx(mu, rel=1e-12)
    release = opt.result().release
    assert release.guarantee.mu == pytest.approx(mu, rel=1e-12)
    # σ_t = 2 B_t √T/(n μ_g), B_t public and following the released counts
    assert release.clip_bounds == QuantileClip(2.0, 0.5, 0.2).replay(release.clip_counts, N)
    for std, bound in zip(release.noise_stds, release.clip_bounds[:T], strict=True):
        assert std == pytest.approx(2 * bound * math.sqrt(T) / (N * mu * math.sqrt(1 - f)), rel=1e-14)


def test_target_epsilon_delta_with_a_noisy_loss_selection_spends_exactly_the_target():
    cfg = _cfg(privacy_mu=None, epsilon=1.0, delta=1e-5, selection="noisy_loss", selection_mu=0.1, loss_clip=50.0)
    opt, objective = _run(cfg)
    X = opt.ask()  # the iterates
    opt.tell(X, objective(X))
    assert opt.ledger.validation.mu() == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-12)
    assert opt.result().release.guarantee.epsilon == pytest.approx(1.0, rel=1e-9)


def test_released_counts_are_the_true_counts_with_negligible_noise():
    # two independent computations agree: the count mechanism's (noise std ~1e-8) and the
    # gradient release's clip decisions (NON-PRIVATE diagnostics, test only)
    opt, _ = _run(_cfg(privacy_mu=1e8, record_non_private_diagnostics=True, clip_init=3.0, clip_learning_rate=1.0))
    result = opt.result()
    within = [round(N * (1 - frac)) for frac in result.diagnostics.clip_fractions]
    assert [round(c) for c in result.release.clip_counts] == within
    assert all(abs(c - round(c)) < 1e-6 for c in result.release.clip_counts)
    assert len(set(result.release.clip_bounds)) == len(result.release.clip_bounds)  # B moved every step


def test_budget_filter_refuses_the_step_before_anything_is_released():
    cfg = _cfg(privacy_mu=1.0, num_iterations=4, validation_mu_budget=0.6)  # room for 1 of the 4 steps (μ/√4 each)
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg)
    X = opt.ask()
    opt.tell(X, objective(X))
    spent = dict(opt.ledger.validation.steps())
    with pytest.raises(PrivacyBudgetExceeded, match="step 1 of run"):  # the count and the gradient together
        opt.ask()
    assert opt.ledger.validation.steps() == spent and opt.result().release.clip_counts.__len__() == 1


def test_resume_continues_bit_identically_and_refuses_a_changed_setting(tmp_path):
    cfg = _cfg()
    full, _ = _run(cfg)
    partial, _ = _run(cfg, steps=2, checkpoint_dir=tmp_path)
    partial.close()  # one owner per directory: the interrupted run gives it up
    resumed = DPGIBO.resume(tmp_path)
    assert resumed.result().release.clip_bounds == full.result().release.clip_bounds[:3]
    assert resumed.iteration == 2 and resumed.guarantee() == partial.guarantee()  # σ of B_1, the latest release's
    _, objective = normal_location(n=N, d=D)
    resumed.run(objective, progress=False)
    a, b = resumed.result().release, full.result().release
    assert a.clip_bounds == b.clip_bounds and a.clip_counts == b.clip_counts
    assert torch.equal(a.released_gradients, b.released_gradients) and torch.equal(a.theta, b.theta)
    resumed.close()
    clip = cfg.clip
    for changed_clip in (
        dataclasses.replace(clip, quantile=0.6),
        dataclasses.replace(clip, fraction=0.2),
        dataclasses.replace(clip, bound=1.0),
        FixedClip(2.0),
    ):
        with pytest.raises(ValueError, match="'clip' differs from the checkpoint"):
            DPGIBO.resume(tmp_path, dataclasses.replace(cfg, clip=changed_clip))


def test_resume_with_the_adaptive_schedules_own_step_cap_checks_the_counts_at_their_charged_mu(tmp_path):
    # the counts are charged μ_C/√T_max with T_max the run's cap (here AdaptiveNorm's max_iterations = 5,
    # not num_iterations = 3); resume must look for that μ in the ledger, and the run continues as it would have
    cfg = _cfg(noise_schedule="adaptive_norm", max_iterations=5)
    assert cfg.iteration_cap == 5 != cfg.num_iterations
    _, objective = normal_location(n=N, d=D)
    full = DPGIBO(cfg)
    full.run(objective, progress=False)
    partial, _ = _run(cfg, steps=2, checkpoint_dir=tmp_path)
    count_mu = cfg.mu_split.clip_mu / math.sqrt(5)
    assert [r.event.mu for r in partial.ledger.validation.records(partial.run_id) if r.key.endswith("/clip")] == [
        count_mu
    ] * 2
    partial.close()
    resumed = DPGIBO.resume(tmp_path)
    assert resumed.iteration == 2
    resumed.run(objective, progress=False)
    a, b = resumed.result().release, full.result().release
    assert a.clip_bounds == b.clip_bounds and a.clip_counts == b.clip_counts and torch.equal(a.theta, b.theta)
    resumed.close()


def test_a_damaged_clip_record_is_refused(tmp_path):
    _run(_cfg(), steps=2, checkpoint_dir=tmp_path)
    state_file = tmp_path / "state.json"
    good = json.loads(state_file.read_text())
    for damage in (
        lambda s: s["strategies"]["clip"]["bounds"].__setitem__(1, (7.0).hex()),
        lambda s: s["strategies"]["clip"]["counts"].pop(),
        lambda s: s["strategies"].__setitem__("clip", {}),
    ):
        state = json.loads(json.dumps(good))
        damage(state)
        state_file.write_text(json.dumps(state))
        with pytest.raises(ValueError, match="strategies.clip"):
            DPGIBO.resume(tmp_path)


# ----------------------------------------------------------------- a user's clip policy plugs in (issue 42)
@register("clip", "test_halving")
class HalvingClip(UserStrategy):
    r"""A user's public clip schedule (no class of the package): ``B`` before step ``at_step``, ``B/2``
    from then on; it releases nothing, so it costs no budget."""

    mu_fraction = None

    def __init__(self, bound: float = 3.0, at_step: int = 2) -> None:
        self.bound, self.at_step = float(bound), int(at_step)

    def params(self) -> dict[str, Any]:
        return {"bound": self.bound, "at_step": self.at_step}

    def at(self, step: int) -> float:
        return self.bound if step < self.at_step else self.bound / 2.0

    def initial_state(self) -> ClipState:
        return ClipState(bounds=(self.at(0),))

    def current(self, state: ClipState) -> float:
        return state.bounds[-1]

    def bound_parts(self, plan: RunPlan) -> dict[str, Any]:
        return {}

    def aggregate(self, users: Any, W: torch.Tensor, state: ClipState) -> Any:
        return users.clipped_sum(W, self.current(state))

    def update(self, summed: Any, plan: RunPlan, state: ClipState, meter: Any) -> ClipState:
        return dataclasses.replace(state, bounds=(*state.bounds, self.at(len(state.bounds))))

    def record(self, state: ClipState) -> ClipState:
        return state


def test_a_users_clip_policy_runs_and_resumes_bit_identically(tmp_path):
    policy: ClipPolicy = HalvingClip(3.0, 2)  # mypy checks the protocol's signatures here
    assert type(policy).__mro__ == (HalvingClip, UserStrategy, object)
    config = config_with(_settings({"num_iterations": 4}), clip=policy)
    assert config.clip is policy
    whole, resumed, opt = run_and_resume(config, tmp_path, stop_after=1)
    assert resumed == whole and type(opt.config.clip) is HalvingClip  # rebuilt from its spec
    bounds = [float.fromhex(b) for b in whole["clip_bounds"]]
    assert bounds == [3.0, 3.0, 1.5, 1.5, 1.5]
    # the fixed schedule's noise follows each step's bound: σ_t = 2 B_t √T / (n μ)
    stds = [float.fromhex(s) for s in whole["noise_stds"]]
    assert stds == pytest.approx([2.0 * b * math.sqrt(4) / (40 * 1.0) for b in bounds[:4]], rel=1e-12)
    assert [key for key, *_ in whole["ledger"]] == [f"step-{t:04d}" for t in range(4)]  # nothing but the steps
