r"""The accounting cannot forget: one charge protocol, checked at the one place noise is drawn.

A harness counts every release actually made — each call of the Gaussian releases
(``mechanisms._noise.release_gaussian`` and ``release_goe``, with the release's ``μ``) and of
the exponential mechanism's Gumbel draw — and compares the ledger with it after randomized sequences (hypothesis) of
asks and tells, tells that fail after their release, retries, budget refusals, crashes
and resumes, and two copies of one checkpoint resumed against one stored ledger: the
ledger's composed cost is at least the composition of the releases made, and equal where
nothing crashed. A test walks the package: no code outside ``privacy/ledger/`` writes
records or formats ledger keys.
"""

from __future__ import annotations

import ast
import contextlib
import math
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import botorch_dp
from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import files as ckpt_files
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger, PureDP
from botorch_dp.privacy.ledger.events import validation_event
from botorch_dp.privacy.ledger.filters import gdp_only
from botorch_dp.privacy.mechanisms import ExponentialLossSelection, GaussianGradientMechanism, _noise
from botorch_dp.privacy.seeding import PrivacyWarning
from tests.optim.loop_helpers import nl_config, normal_location

PACKAGE = Path(botorch_dp.__file__).parent
ROOT = PACKAGE.parent


# ----------------------------------------------------------------------- the harness
class Draws:
    r"""Counts the releases made: one per Gaussian draw (its ``μ``), one per Gumbel draw (the
    exponential mechanism's ``ε``, charged as its GDP ``μ``)."""

    def __init__(self) -> None:
        self.mus: list[float] = []

    @property
    def square(self) -> float:
        return math.fsum(mu * mu for mu in self.mus)


@contextlib.contextmanager
def counting_draws():
    r"""Patch the draw sites of ``privacy.mechanisms._noise`` for the block; yields the ``Draws``."""
    draws = Draws()
    gaussian, goe = _noise.release_gaussian, _noise.release_goe
    gumbel, exponential = _noise.draw_gumbel, ExponentialLossSelection.release_sums
    pending: list[float] = []

    def counted_gaussian(statistic, *, mu, per_coordinate=False, **kwargs):
        if math.isfinite(mu):  # one release (μ = inf: nothing is drawn or hidden); q scores compose to μ√q
            draws.mus.append(mu * math.sqrt(statistic.numel()) if per_coordinate else mu)
        return gaussian(statistic, mu=mu, per_coordinate=per_coordinate, **kwargs)

    def counted_goe(G, *, mu, **kwargs):
        if math.isfinite(mu):
            draws.mus.append(mu)
        return goe(G, mu=mu, **kwargs)

    def counted_gumbel(*args, **kwargs):
        draws.mus.append(pending[-1])
        return gumbel(*args, **kwargs)

    def exponential_release(self, *args, **kwargs):
        pending.append(PureDP(self.epsilon).mu)
        return exponential(self, *args, **kwargs)

    _noise.release_gaussian, _noise.release_goe, _noise.draw_gumbel = counted_gaussian, counted_goe, counted_gumbel
    ExponentialLossSelection.release_sums = exponential_release  # release() goes through it too
    try:
        yield draws
    finally:
        _noise.release_gaussian, _noise.release_goe, _noise.draw_gumbel = gaussian, goe, gumbel
        ExponentialLossSelection.release_sums = exponential


def _ledger_square(ledger: PrivacyLedger) -> float:
    events = [validation_event(r.event) for r in ledger.validation.records()]
    assert gdp_only(events)
    return math.fsum(e.mu**2 for e in events)


OPTIONS = {
    "fixed": {},
    "adaptive_norm": {"noise_schedule": "adaptive_norm", "max_iterations": 4},
    "adaptive_clip": {"clip_bound": "adaptive", "clip_init": 1.0},
    "noisy_loss": {"selection": "noisy_loss", "selection_mu": 0.3, "loss_clip": 20.0},
    "exponential": {"selection": "exponential", "selection_epsilon": 0.4, "loss_clip": 20.0},
}


def _config(option: str, **kw):
    base: dict[str, Any] = dict(d=2, privacy_mu=1.0, clip_bound=2.0, num_iterations=3, batch_size=2, seed=7)
    base.update(OPTIONS[option])
    base.update(kw)
    return nl_config(**base)


class _Fail(Exception):
    r"""The checkpoint write that fails after a step's release (a full disk, a crash)."""


@contextlib.contextmanager
def failing_writes(flags: list[bool]):
    r"""Make the ``i``-th checkpoint write fail when ``flags`` says so (after that, writes work)."""
    real, calls = ckpt_files.write_atomic, iter(flags)

    def write(dir_fd, name, *args, **kwargs):
        if name == ckpt.STATE_FILE and next(calls, False):
            raise _Fail("the checkpoint write failed after the release")
        return real(dir_fd, name, *args, **kwargs)

    ckpt_files.write_atomic = write
    try:
        yield
    finally:
        ckpt_files.write_atomic = real


def _retried(call, retries: int = 12):
    r"""``call()``, retried after a failed checkpoint write (as the tell docstring invites)."""
    for attempt in range(retries + 1):
        try:
            return call()
        except _Fail:
            if attempt == retries:
                raise


def _drive(opt: DPGIBO, objective) -> None:
    r"""Ask and tell to the end, retrying what failed."""
    while not opt.is_done:
        X = _retried(opt.ask)
        _retried(lambda X=X: opt.tell(X, objective(X)))


# ------------------------------------------------------------- randomized sequences
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    option=st.sampled_from(sorted(OPTIONS)),
    failures=st.lists(st.booleans(), min_size=0, max_size=10),
    budget=st.sampled_from([None, 0.6, 1.0]),
    crash_after=st.integers(min_value=0, max_value=4),
)
def test_the_ledger_holds_at_least_every_release_made(tmp_path_factory, option, failures, budget, crash_after):
    r"""Tells that fail after their release and are retried, a tight shared ledger (its budget
    below the run's), a crash (the object dropped after ``crash_after`` tells) and a resume
    from the checkpoint: the stored ledger records every release the draws made, and no more
    (nothing was lost with the dropped object: a record is made before its draw)."""
    root = tmp_path_factory.mktemp("run")
    _, objective = normal_location(n=12, d=2)
    ledger = PrivacyLedger(storage=root / "ledger.db", dataset="users", validation_mu_budget=budget)
    with warnings.catch_warnings(), counting_draws() as draws, failing_writes(failures):
        warnings.simplefilter("ignore", PrivacyWarning)
        opt = DPGIBO(_config(option), checkpoint_dir=root / "ckpt", ledger=ledger)
        try:
            for _ in range(crash_after):
                if opt.is_done:
                    break
                with contextlib.suppress(_Fail):
                    X = opt.ask()
                    opt.tell(X, objective(X))
            del opt  # the process is gone: only the checkpoint and the stored ledger remain
            again = PrivacyLedger(storage=root / "ledger.db", dataset="users")
            if (root / "ckpt" / ckpt.STATE_FILE).exists():
                resumed = DPGIBO.resume(root / "ckpt", ledger=again)
            else:  # it died before its first ask: nothing to resume, a new run starts
                resumed = DPGIBO(_config(option), checkpoint_dir=root / "ckpt2", ledger=again)
            _drive(resumed, objective)
        except PrivacyBudgetExceeded:
            pass  # refused before its noise: nothing was drawn for it
    reopened = PrivacyLedger(storage=root / "ledger.db", dataset="users")
    assert draws.mus, "the scenario released nothing"
    assert _ledger_square(reopened) == pytest.approx(draws.square, rel=1e-12)
    assert len(reopened.reservation_holders()) == 0
    if budget is not None:
        assert math.sqrt(_ledger_square(reopened)) <= budget * (1 + 1e-9)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_two_copies_of_one_checkpoint_resumed_against_one_stored_ledger_are_both_charged(tmp_path, option):
    r"""A retried job whose first attempt still runs, or a copied directory: both copies release
    the remaining steps with their own noise, and the ledger charges every one of them."""
    _, objective = normal_location(n=12, d=2)
    url = tmp_path / "ledger.db"
    with warnings.catch_warnings(), counting_draws() as draws:
        warnings.simplefilter("ignore", PrivacyWarning)
        first = DPGIBO(
            _config(option, seed=None),
            checkpoint_dir=tmp_path / "a",
            ledger=PrivacyLedger(storage=url, dataset="users"),
        )
        X = first.ask()
        first.tell(X, objective(X))
        first.close()  # its process ends (a live one would own "a": the next opener is refused)
        shutil.copytree(tmp_path / "a", tmp_path / "b")
        for directory in ("a", "b"):
            with DPGIBO.resume(tmp_path / directory, ledger=PrivacyLedger(storage=url, dataset="users")) as copy:
                try:
                    _drive(copy, objective)
                except PrivacyBudgetExceeded:  # adaptive schedule: the other copy spent this run's share
                    assert option == "adaptive_norm" and directory == "b"
    ledger = PrivacyLedger(storage=url, dataset="users")
    made = len(draws.mus)
    assert len(ledger.validation.records()) == made and made > 2 * len(OPTIONS[option]) // 2
    assert _ledger_square(ledger) == pytest.approx(draws.square, rel=1e-12)


def _one_process(url: str, seed: int, option: str, start, results) -> None:
    r"""A DP-GIBO run in its own process on the shared stored ledger; reports its draws."""
    _, objective = normal_location(n=12, d=2)
    with warnings.catch_warnings(), counting_draws() as draws:
        warnings.simplefilter("ignore")
        opt = DPGIBO(_config(option, seed=seed), ledger=PrivacyLedger(storage=url, dataset="users"))
        start.wait()
        try:
            opt.run(objective, progress=False)
        except PrivacyBudgetExceeded:
            pass  # the other process spent the rest: refused before the noise
    results.put(draws.mus)


@pytest.mark.parametrize("option", ["fixed", "adaptive_norm"])
def test_processes_sharing_a_stored_ledger_are_charged_for_every_release_and_no_more(tmp_path, option):
    import multiprocessing

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    PrivacyLedger(storage=url, dataset="users", validation_mu_budget=1.5)  # two runs of mu = 1 do not fit
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2, timeout=300), ctx.Queue()
    procs = [ctx.Process(target=_one_process, args=(url, seed, option, start, results)) for seed in (1, 2)]
    for p in procs:
        p.start()
    made = [mu for _ in procs for mu in results.get(timeout=300)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    ledger = PrivacyLedger(storage=url, dataset="users")
    assert _ledger_square(ledger) == pytest.approx(math.fsum(mu * mu for mu in made), rel=1e-12)
    assert len(ledger.validation.records()) == len(made) and ledger.validation.mu() <= 1.5 * (1 + 1e-9)
    assert len(ledger.reservation_holders()) == 0


class _Quadratic:
    r"""Per-user squared distances to fixed points (a picklable objective for worker processes)."""

    def __init__(self, n: int = 12, d: int = 2) -> None:
        self.x = normal_location(n=n, d=d)[0]

    def __call__(self, X):
        return 0.5 * (X[:, None, :] - self.x[None]).pow(2).sum(-1)


def test_the_loop_over_a_process_pool_is_charged_for_every_release():
    from botorch_dp.evaluation import process_pool

    objective = _Quadratic()
    ledger = PrivacyLedger()
    with warnings.catch_warnings(), counting_draws() as draws, process_pool(2) as pool:
        warnings.simplefilter("ignore", PrivacyWarning)
        DPGIBO(_config("adaptive_clip"), ledger=ledger).run(objective, progress=False, executor=pool)
    assert len(draws.mus) == 6 and _ledger_square(ledger) == pytest.approx(draws.square, rel=1e-12)


def test_a_retried_adaptive_step_on_a_tight_shared_ledger_never_releases_uncharged():
    r"""The defect: with ``"adaptive_norm"`` and a ledger budget below the schedule's, the step
    released its noisy norm, then asked about a gradient μ_t that depends on it; the refusal
    revealed 1[N_t < τ] and the rollback erased the norm's record, so retries leaked without
    bound. Now the schedule plans with what the ledger has left, the step's worst case is
    admitted before any draw, and every draw is charged."""
    _, objective = normal_location(n=12, d=2)
    shared = PrivacyLedger(validation_mu_budget=0.5)
    shared.external.record(Gaussian(0.3), run_id="earlier-run", key="step-0000")  # another run on the same users
    with warnings.catch_warnings(), counting_draws() as draws:
        warnings.simplefilter("ignore", PrivacyWarning)
        opt = DPGIBO(_config("adaptive_norm", privacy_mu=1.0), ledger=shared)
        refusals = 0
        while not opt.is_done and refusals < 12:
            X = opt.ask()
            try:
                opt.tell(X, objective(X))
            except PrivacyBudgetExceeded:
                refusals += 1
    assert opt.is_done and refusals == 0  # the run ends when the ledger is spent, no step refused half way
    assert _ledger_square(shared) == pytest.approx(0.09 + draws.square, rel=1e-12)
    assert shared.validation.mu() <= 0.5 * (1 + 1e-9)
    other = DPGIBO(_config("adaptive_norm"), ledger=shared)
    with counting_draws() as more, pytest.raises(PrivacyBudgetExceeded):
        other.ask()  # refused before its batch is even evaluated
    assert more.mus == [] and other.state.pending is None  # refused before the noise, not after


def test_the_budget_is_checked_before_the_draw_not_when_recording():
    r"""Without the check before the release, the record (a fact) would go in over the budget:
    the ledger would end above it. Here the step is refused and nothing is drawn."""
    ledger = PrivacyLedger(validation_mu_budget=0.5)
    mechanism = GaussianGradientMechanism(clip_bound=1.0, num_users=4, privacy_mu=0.6, num_steps=1)
    A, Y = torch.eye(2, dtype=torch.float64), torch.ones(2, 4, dtype=torch.float64)
    with counting_draws() as draws, pytest.raises(PrivacyBudgetExceeded):
        with ledger.charge({"grad": Gaussian(mechanism.step_mu)}, run_id="r", step=0) as meter:
            mechanism.release(A, Y, meter=meter)
    assert draws.mus == [] and ledger.validation.records() == [] and ledger.validation.mu() <= 0.5
    with counting_draws() as draws, ledger.charge({"grad": Gaussian(0.5)}, run_id="r", step=0) as meter:
        with pytest.raises(ValueError, match="exceeds the step's bound"):  # more than admitted: no draw
            mechanism.release(A, Y, meter=meter)
    assert draws.mus == [] and ledger.validation.records() == []


# ------------------------------------------------------------ nothing else records
#: The ledger's part that writes records and checks budgets outside the charge protocol
#: (``ledger.external.record`` / ``.check``): inside the package only the ledger itself may
#: reach it, so any use of an ``external`` attribute outside the ledger package is flagged.
LOW_LEVEL_PART = "external"
#: The deprecated spellings of the same (forwarded by ``privacy.ledger.deprecated``).
LOW_LEVEL = frozenset(
    {
        "record_validation_step",
        "record_validation_pure",
        "record_validation_mechanism",
        "record_training_run",
        "record_training_mechanism",
        "check_validation_step",
        "check_validation_mechanism",
        "check_training_run",
        "check_training_mechanism",
    }
)
LEDGER_PACKAGE = "botorch_dp/privacy/ledger/"


def protocol_violations(modules: dict[str, str]) -> list[str]:
    r"""``module:line what`` for every use of the ledger's ``external`` part (or a deprecated
    low-level method), and every f-string that builds a ``step-…`` key, outside the ledger package."""
    found = []
    for module, source in sorted(modules.items()):
        if module.startswith(LEDGER_PACKAGE):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr == LOW_LEVEL_PART:
                found.append(f"{module}:{node.lineno} {node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOW_LEVEL:
                found.append(f"{module}:{node.lineno} {node.func.attr}")
            if isinstance(node, ast.JoinedStr) and any(
                isinstance(v, ast.Constant) and isinstance(v.value, str) and "step-" in v.value for v in node.values
            ):
                found.append(f"{module}:{node.lineno} f-string key")
    return found


def _package_sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_code_outside_the_ledger_writes_records_or_formats_keys():
    assert protocol_violations(_package_sources()) == []


def test_the_walker_sees_an_inserted_record_and_an_inserted_key():
    path = "botorch_dp/optim/dp_gibo.py"
    source = (PACKAGE / "optim" / "dp_gibo.py").read_text()
    anchor = "        self._save_checkpoint()  # durable before the step is returned\n"
    assert anchor in source and protocol_violations({path: source}) == []
    for inserted, what in (
        ("        self.ledger.external.record(Gaussian(0.1), run_id=self.run_id, key='x')\n", "external"),
        ("        self.ledger.external.check(Gaussian(0.1))\n", "external"),
        ("        part = self.ledger.external\n", "external"),
        ("        self.ledger.record_validation_step(0.1, run_id=self.run_id, key='x')\n", "record_validation_step"),
        ('        key = f"step-{self.iteration:04d}"\n', "f-string key"),
    ):
        found = protocol_violations({path: source.replace(anchor, anchor + inserted)})
        assert len(found) == 1 and found[0].endswith(what), found
