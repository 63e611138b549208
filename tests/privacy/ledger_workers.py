r"""Child processes of ``test_ledger_storage.py``: runs that share one stored ledger.

The test starts ONE fresh process (``spawn``: nothing of the test process, its imports or
its connections is inherited), which loads the ledger once and forks the racing or dying
runs from that clean state (``race``, ``crash``); each run opens its own connection. The
helper loads only the ledger modules (not ``botorch_dp/__init__``, which imports
torch and BoTorch): it registers the two parent packages as bare namespace modules, so
that ``botorch_dp.privacy.ledger`` and ``ledger_storage`` are imported from this checkout's
source files, as they are, without the rest of the library.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import types
from pathlib import Path
from typing import Any

from botorch_dp.privacy.ledger import Gaussian

_ROOT = Path(__file__).resolve().parents[2]


def ledger_modules() -> tuple[Any, Any]:
    r"""``(botorch_dp.privacy.ledger, botorch_dp.privacy.ledger_storage)``, loaded lightly."""
    if "botorch_dp" not in sys.modules:
        for name, path in (
            ("botorch_dp", _ROOT / "botorch_dp"),
            ("botorch_dp.privacy", _ROOT / "botorch_dp" / "privacy"),
        ):
            module = types.ModuleType(name)
            module.__path__ = [str(path)]
            sys.modules[name] = module
    import botorch_dp.privacy.ledger as ledger
    import botorch_dp.privacy.ledger_storage as storage

    return ledger, storage


def spend(url: str, dataset: str, mu: float, run_id: str, start: Any, results: Any) -> None:
    r"""One run: wait for the others, charge the step (check and reserve), record and "release";
    report the outcome.

    Inside every write transaction the child sleeps 20 ms before committing, so that a
    filter without the lock would let several runs read the same spent total.
    """
    ledger, storage = ledger_modules()
    storage._before_commit = lambda tx: time.sleep(0.02)
    book = ledger.PrivacyLedger(storage=url, dataset=dataset)  # adopts the stored budget
    start.wait()
    event = ledger.Gaussian(mu)
    try:
        with book.charge({"grad": event}, run_id=run_id, step=0) as meter:  # reserves, before the release
            time.sleep(0.01)
            meter.record("grad", event)  # just before the draw
            time.sleep(0.01)  # the release would happen here
    except ledger.PrivacyBudgetExceeded:
        results.put((run_id, "refused"))
        return
    results.put((run_id, "released"))


def die_in_transaction(url: str, dataset: str, mu: float, where: str, ready: Any) -> None:
    r"""Record a release but die inside its transaction, after the budget check.

    ``where``: ``"exit-before-insert"`` (``os._exit`` after the check, before the row is
    written), ``"exit-before-commit"`` (``os._exit`` after the row is written, before the
    commit), ``"hang-before-commit"`` (signal ``ready`` and wait to be killed with SIGKILL).
    """
    ledger, storage = ledger_modules()
    book = ledger.PrivacyLedger(storage=url, dataset=dataset)
    if where == "exit-before-insert":
        storage.LedgerTransaction._insert = lambda self, **kw: os._exit(3)
    elif where == "exit-before-commit":
        storage._before_commit = lambda tx: os._exit(3)
    else:

        def hang(tx: Any) -> None:
            ready.set()
            time.sleep(120)

        storage._before_commit = hang
    book.external.record(Gaussian(mu), run_id="doomed", key="step-0000")
    os._exit(0)  # not reached


def race(url: str, dataset: str, mu: float, runs: int, results: Any, curves: bool = False) -> None:
    r"""``runs`` processes run ``spend`` (``spend_curve`` with ``curves``) at once; then
    ``("exitcodes", [...])`` is reported."""
    ledger_modules()
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(runs, timeout=120)
    target = spend_curve if curves else spend
    procs = [ctx.Process(target=target, args=(url, dataset, mu, f"run-{i}", start, results)) for i in range(runs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    results.put(("exitcodes", [p.exitcode for p in procs]))


def crash(url: str, dataset: str, mu: float, results: Any) -> None:
    r"""One process per way of dying inside the record's transaction (``die_in_transaction``),
    one after the other; the one that hangs is killed with SIGKILL. Reports ``(where, exitcode)``."""
    ledger_modules()
    ctx = multiprocessing.get_context("fork")
    for where in ("hang-before-commit", "exit-before-insert", "exit-before-commit"):
        ready = ctx.Event()
        p = ctx.Process(target=die_in_transaction, args=(url, dataset, mu, where, ready))
        p.start()
        if where == "hang-before-commit":
            ready.wait(timeout=120)  # its row written, the lock held
            assert p.pid is not None  # started
            os.kill(p.pid, signal.SIGKILL)
        p.join(timeout=120)
        results.put((where, p.exitcode))


def spend_curve(url: str, dataset: str, mu: float, run_id: str, start: Any, results: Any) -> None:
    r"""``spend`` for a validation release given by its RDP curve α ↦ α μ²/2."""
    ledger, storage = ledger_modules()
    storage._before_commit = lambda tx: time.sleep(0.02)
    book = ledger.PrivacyLedger(storage=url, dataset=dataset)

    def curve(alpha: float) -> float:
        return alpha * mu * mu / 2.0

    start.wait()
    event = ledger.ValidationMechanism("curve", tuple(curve(a) for a in ledger.TRAINING_RDP_ORDERS))
    try:
        with book.charge({"select": event}, run_id=run_id) as meter:
            time.sleep(0.01)
            meter.record("select", event)
            time.sleep(0.01)  # the release would happen here
    except ledger.PrivacyBudgetExceeded:
        results.put((run_id, "refused"))
        return
    results.put((run_id, "released"))


def hold_a_step(url: str, dataset: str, run_id: str, step: int, mu: float, lease: float, ready: Any, go: Any) -> None:
    r"""A run's step held open between its check and its record (the injected delay): the charge
    admits and reserves step ``step``, signals ``ready``, and records only once ``go`` is set (or
    is killed before). The lease is ``lease`` seconds, renewed by this process meanwhile."""
    ledger, _ = ledger_modules()
    import botorch_dp.privacy.ledger.holders as holders

    holders.LEASE_SECONDS = lease
    book = ledger.PrivacyLedger(storage=url, dataset=dataset)
    event = ledger.Gaussian(mu)
    with book.charge({"grad": event}, run_id=run_id, step=step) as meter:
        ready.set()
        go.wait(timeout=120)  # checked and held; the release is not made yet
        meter.record("grad", event)
    os._exit(0)


def lock_a_directory(directory: str, ready: Any, go: Any) -> None:
    r"""Own a checkpoint directory (``storage.lock``, loaded without torch) until ``go`` is set."""
    if "botorch_dp" not in sys.modules:
        for name, path in (
            ("botorch_dp", _ROOT / "botorch_dp"),
            ("botorch_dp.optim", _ROOT / "botorch_dp" / "optim"),
            ("botorch_dp.optim.checkpoint", _ROOT / "botorch_dp" / "optim" / "checkpoint"),
        ):
            module = types.ModuleType(name)
            module.__path__ = [str(path)]
            sys.modules[name] = module
    from botorch_dp.storage.lock import CheckpointLock

    lock = CheckpointLock(directory, "DPGIBO")
    ready.set()
    go.wait(timeout=120)
    lock.release()
    os._exit(0)
