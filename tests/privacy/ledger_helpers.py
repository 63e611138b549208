r"""Shared by the ledger's tests (ledger/test_ledger.py, ledger/test_state.py,
test_ledger_training_rdp.py): DP-SGD runs and Gaussian releases put through the ledger's one
charge protocol, and the Gaussian mechanism's RDP curve."""

import subprocess
import sys
import time

from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, DPSGDRun, Gaussian, TrainingMechanism
from botorch_dp.privacy.ledger.holders import this_holder

DELTA = 1e-5
RUNS = [("eval-0", 1.1, 0.02, 100), ("eval-1", 1.1, 0.02, 100), ("eval-2", 0.9, 0.05, 40)]


def record_runs(ledger, runs=RUNS):
    for run_id, noise_multiplier, sample_rate, steps in runs:
        ledger.external.record(
            DPSGDRun(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps), run_id=run_id
        )


def step_key(t):
    return f"step-{t:04d}"


def spend(ledger, mu, run_id, step, part="grad"):
    """One release through the charge protocol: admitted before, recorded at the draw."""
    event = Gaussian(mu)
    with ledger.charge({part: event}, run_id=run_id, step=step) as meter:
        meter.record(part, event)


def train(ledger, runs=RUNS):
    """DP-SGD runs through the training charge (admitted before, recorded before training)."""
    for run_id, noise_multiplier, sample_rate, steps in runs:
        with ledger.charge_training({run_id: DPSGDRun.checked(noise_multiplier, sample_rate, steps)}) as meter:
            meter.record(run_id)


def train_curve(ledger, run_id, curve, description):
    event = TrainingMechanism(description, tuple(curve(a) for a in TRAINING_RDP_ORDERS))
    with ledger.charge_training({run_id: event}) as meter:
        meter.record(run_id)


def gaussian_curve(sigma, sensitivity=1.0):
    """RDP of the Gaussian mechanism: ε(α) = α·Δ²/(2σ²)."""
    return lambda alpha: alpha * sensitivity**2 / (2.0 * sigma**2)


def gone_holder():
    """The stored holder of a process of this node that has exited (its pid reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return {**this_holder().to_json(), "pid": child.pid, "token": "gone"}


def elsewhere_holder():
    """The stored holder of a process on another node (only its lease tells whether it is gone)."""
    return {"pid": 1, "host": "elsewhere", "node": "elsewhere/boot/pid:[1]", "token": "far"}


def reserve_for(storage, dataset, run_id, mu, holder=None, lease=None):
    """A reservation as a process leaves it (``holder``/``lease`` None: one written before holders)."""
    with storage.transaction(dataset) as tx:
        return tx.reserve(
            side="validation",
            entry={"mu": mu},
            run_id=run_id,
            owner="x" * 32,
            holder=holder,
            lease_expires=None if lease is None else time.time() + lease,
        )
