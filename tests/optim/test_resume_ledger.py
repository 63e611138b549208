r"""Resuming never makes the ledger forget (issue 28): a resume merges into a live ledger, a
dead process's reservation is settled when its run resumes, and a caller-chosen run id is never
charged for free twice. (A checkpoint whose ledger lost records is refused: test_resume_checks.py.)"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from botorch_dp.baselines import dp_hypo, noisy_gradient_descent, private_random_search
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.ledger_storage import open_storage
from tests.optim.loop_helpers import normal_location
from tests.optim.loop_helpers import resume_config as _config
from tests.privacy.ledger_helpers import elsewhere_holder, gone_holder, reserve_for

pytestmark = pytest.mark.usefixtures("quiet_seeds")  # tests/optim/conftest.py


def test_resume_into_a_live_ledger_merges_with_the_other_runs_records(tmp_path):
    r"""The defect: ``DPGIBO.resume(ckpt, ledger=L)`` replaced ``L``'s state, so ``L`` reported
    0.6 where two μ = 0.6 runs on it compose to 0.8485."""
    _, objective = normal_location(n=12, d=2)
    shared = PrivacyLedger()
    DPGIBO(_config(seed=1), ledger=shared).run(objective, progress=False)  # another run on the same users
    opt = DPGIBO(_config(seed=2), checkpoint_dir=tmp_path)
    opt.run(objective, progress=False)
    opt.close()
    resumed = DPGIBO.resume(tmp_path, ledger=shared)
    assert shared.validation.mu() == pytest.approx(math.hypot(0.6, 0.6), rel=1e-12)
    assert shared.validation.mu(run_id=resumed.run_id) == pytest.approx(0.6, rel=1e-12)
    assert resumed.guarantee().mu == pytest.approx(0.8485, abs=1e-4)


def test_a_dead_processs_reservation_is_settled_when_its_run_resumes(tmp_path):
    r"""The defect: a process killed between a stored ledger's check and its record left a
    reservation nobody could cancel. It names its holder now, and the run's resume drops it once
    that holder is gone — and only then: a live holder's reservation refuses the resume by name."""
    _, objective = normal_location(n=12, d=2)
    url = tmp_path / "ledger.db"
    opt = DPGIBO(
        _config(),
        checkpoint_dir=tmp_path / "ckpt",
        ledger=PrivacyLedger(storage=url, dataset="users", validation_mu_budget=1.0),
    )
    opt.run(objective, progress=False, callback=lambda info: info.iteration == 1)
    opt.close()
    store = open_storage(url)
    reserve_for(store, "users", opt.run_id, 0.3, elsewhere_holder(), lease=60.0)  # live on another machine
    ledger = PrivacyLedger(storage=url, dataset="users")
    with pytest.raises(RuntimeError, match=f"Run '{opt.run_id}' is live: process 1 on host 'elsewhere'"):
        DPGIBO.resume(tmp_path / "ckpt", ledger=ledger)
    assert len(ledger.reservation_holders()) == 1
    with store.transaction("users") as tx:  # that process is gone: its lease ran out
        tx.renew_leases(["x" * 32], 0.0)
    reserve_for(store, "users", opt.run_id, 0.3, gone_holder(), lease=60.0)  # what a process killed here leaves
    held = ledger.validation.remaining_mu()
    assert len(ledger.reservation_holders()) == 2
    resumed = DPGIBO.resume(tmp_path / "ckpt", ledger=ledger)  # the failed resume gave the directory back
    assert len(ledger.reservation_holders()) == 0 and ledger.validation.remaining_mu() > held
    resumed.run(objective, progress=False)
    assert ledger.validation.mu() == pytest.approx(0.6, rel=1e-12)


def test_a_run_id_the_ledger_holds_is_refused_before_anything_is_released():
    r"""The defect: a second ``dp_hypo(..., run_id="tuning")`` on one ledger was not charged
    (the "already recorded" answer was ignored). Every entry point that takes a run id refuses
    a taken one; with its default id every call is a new run."""
    x, objective = normal_location(n=12, d=2)
    bounds = torch.tensor([[-2.0, -2.0], [4.0, 4.0]], dtype=torch.float64)
    ledger = PrivacyLedger()
    hypo = dict(
        mean_trials=3.0, per_trial_mu=0.3, loss_clip=20.0, ratio_bound=1.0, num_candidates=64, seed=0, ledger=ledger
    )
    dp_hypo(objective, bounds, run_id="tuning", **hypo)
    spent = ledger.validation.rdp_curve()
    with pytest.raises(ValueError, match="'tuning' is already in the ledger"):
        dp_hypo(objective, bounds, run_id="tuning", **hypo)
    assert ledger.validation.rdp_curve() == spent
    dp_hypo(objective, bounds, **hypo)  # a new default id: charged again
    assert ledger.validation.rdp_curve()[0] == pytest.approx(2 * spent[0], rel=1e-12)
    search = dict(mean_trials=3.0, per_trial_mu=0.3, loss_clip=20.0, seed=0, ledger=ledger)
    private_random_search(objective, bounds, run_id="search", **search)
    with pytest.raises(ValueError, match="'search' is already in the ledger"):
        private_random_search(objective, bounds, run_id="search", **search)

    def gradients(theta):
        return theta[:, None, :] - x[None]

    gd_ledger = PrivacyLedger()
    gd = dict(num_iterations=3, clip_bound=2.0, step_size=0.3, privacy_mu=0.5, seed=0, ledger=gd_ledger)
    noisy_gradient_descent(gradients, bounds, run_id="gd", **gd)
    assert gd_ledger.validation.mu(run_id="gd") == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(ValueError, match="'gd' is already in the ledger"):
        noisy_gradient_descent(gradients, bounds, run_id="gd", **gd)
    assert gd_ledger.validation.mu() == pytest.approx(0.5, rel=1e-12)


def _resume_with_a_delay_in_step_2(directory, url, ready, go, results):
    r"""Process A: resume the run against the stored ledger and stop inside step 2's charge (checked
    and held, not yet recorded) until ``go``; then run to the end."""

    from botorch_dp.privacy.ledger import PrivacyBudgetExceeded
    from botorch_dp.privacy.ledger.meter import Meter

    warnings.simplefilter("ignore")
    record = Meter.record

    def delayed(meter, part, event):
        if meter.step == 2 and not ready.is_set():
            ready.set()
            go.wait(timeout=120)
        return record(meter, part, event)

    Meter.record = delayed
    _, objective = normal_location(n=12, d=2)
    opt = DPGIBO.resume(directory, ledger=PrivacyLedger(storage=url, dataset="users"))
    try:
        opt.run(objective, progress=False)
    except PrivacyBudgetExceeded:
        pass  # the budget allows three of the four steps
    results.put(opt.iteration)


@pytest.mark.timeout(300)
def test_a_second_process_cannot_resume_a_run_whose_holder_is_inside_a_step(tmp_path):
    r"""The attack of issue 40 (items 3 and 4) with two real DP-GIBO processes: A is inside step 2's
    charge (a delay between check and record) when B resumes. B is refused the directory A owns, and
    a copy of it is refused by the live reservation, both naming A's process and host; the stored
    ledger ends at its budget 0.866 (before: 1.0, both processes released step 2)."""
    import multiprocessing
    import shutil
    import socket

    from botorch_dp.privacy.ledger import PrivacyBudgetExceeded
    from botorch_dp.storage.lock import CheckpointInUseError

    _, objective = normal_location(n=12, d=2)
    url, budget = f"sqlite:///{tmp_path / 'ledger.db'}", math.sqrt(0.75)
    ledger = PrivacyLedger(storage=url, dataset="users", validation_mu_budget=budget)
    with DPGIBO(_config(privacy_mu=1.0), checkpoint_dir=tmp_path / "a", ledger=ledger) as first:  # steps of 0.5
        first.run(objective, progress=False, callback=lambda info: info.iteration == 2)
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    ctx = multiprocessing.get_context("spawn")
    ready, go, results = ctx.Event(), ctx.Event(), ctx.Queue()
    a = ctx.Process(target=_resume_with_a_delay_in_step_2, args=(tmp_path / "a", url, ready, go, results))
    a.start()
    try:
        assert ready.wait(timeout=240), "A did not reach step 2"
        host = socket.gethostname()
        with pytest.raises(CheckpointInUseError, match=f"a DPGIBO of process {a.pid} on host '{host}'"):
            DPGIBO.resume(tmp_path / "a", ledger=PrivacyLedger(storage=url, dataset="users"))
        with pytest.raises(RuntimeError, match=f"is live: process {a.pid} on host '{host}'"):
            DPGIBO.resume(tmp_path / "copy", ledger=PrivacyLedger(storage=url, dataset="users"))
    finally:
        go.set()
    assert results.get(timeout=240) == 3
    a.join(timeout=60)
    assert a.exitcode == 0
    assert ledger.validation.mu() == pytest.approx(budget, rel=1e-12) and len(ledger.reservation_holders()) == 0
    with DPGIBO.resume(tmp_path / "copy", ledger=PrivacyLedger(storage=url, dataset="users")) as late:
        with pytest.raises(PrivacyBudgetExceeded):  # A is gone now; the copy's step 2 does not fit
            late.ask()
    assert ledger.validation.mu() == pytest.approx(budget, rel=1e-12)
