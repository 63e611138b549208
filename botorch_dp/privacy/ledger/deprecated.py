r"""The ledger's old method names, forwarded to the new spelling with a ``DeprecationWarning``.

Before the ledger was composed of parts it had 39 public methods; the reads now live in
``ledger.validation`` and ``ledger.training``, the checks and records of releases made elsewhere
in ``ledger.external``. ``PrivacyLedger.__getattr__`` (reached only for a name the ledger does
not have) asks ``deprecated_attribute``, which warns and forwards; nothing in the package calls
an old name (a test walks the package and the tests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botorch_dp.privacy.ledger.events import (
    DPSGDRun,
    Gaussian,
    PureDP,
    TrainingMechanism,
    ValidationMechanism,
)
from botorch_dp.utils import warn_renamed

#: The ledger (``ledger.PrivacyLedger``, which imports this module; not imported back, to keep the
#: import graph free of cycles).
PrivacyLedger = Any

__all__ = ["RENAMED", "deprecated_attribute"]


def _record(ledger: PrivacyLedger, event: Any, run_id: Any, key: str | None = None) -> bool:
    ledger.external.record(event, run_id=run_id, key=key)
    return True  # what the old record methods returned


def _pure_epsilons(ledger: PrivacyLedger) -> dict[tuple[str, str], float]:
    found: dict[tuple[str, str], float] = {}
    for r in ledger.validation.records():
        if isinstance(r.event, PureDP):
            key = (str(r.run_id), r.key)
            found[key] = found.get(key, 0.0) + r.event.epsilon
    return found


_Read = Callable[[PrivacyLedger], Any]

#: Old name ↦ (its new spelling, the value the old name gave: a property's value, or the method).
RENAMED: dict[str, tuple[str, _Read]] = {
    # reads
    "validation_records": ("ledger.validation.records(run_id)", lambda led: led.validation.records),
    "training_records": ("ledger.training.records()", lambda led: led.training.records),
    "num_reservations": ("len(ledger.reservation_holders())", lambda led: lambda: len(led.reservation_holders())),
    "has_run": ("bool(ledger.records(run_id=run_id))", lambda led: lambda run_id: bool(led.records(run_id=run_id))),
    "validation_steps": ("ledger.validation.steps()", lambda led: led.validation.steps()),
    "validation_mechanisms": ("ledger.validation.mechanisms()", lambda led: led.validation.mechanisms()),
    "validation_pure_epsilons": ("the PureDP events of ledger.validation.records()", _pure_epsilons),
    "validation_run_ids": ("ledger.validation.run_ids()", lambda led: led.validation.run_ids),
    "validation_release_curves": ("ledger.validation.release_curves()", lambda led: led.validation.release_curves),
    "validation_mu": ("ledger.validation.mu(run_id)", lambda led: led.validation.mu),
    "validation_rdp_curve": ("ledger.validation.rdp_curve(run_id)", lambda led: led.validation.rdp_curve),
    "validation_epsilon": ("ledger.validation.epsilon(delta)", lambda led: led.validation.epsilon),
    "remaining_validation_mu": ("ledger.validation.remaining_mu()", lambda led: led.validation.remaining_mu),
    "check_admits": ("ledger.validation.check_admits(bound)", lambda led: led.validation.check_admits),
    "training_runs": ("ledger.training.runs()", lambda led: led.training.runs()),
    "training_mechanisms": ("ledger.training.mechanisms()", lambda led: led.training.mechanisms()),
    "training_approximate": ("ledger.training.approximate()", lambda led: led.training.approximate()),
    "training_run_ids": ("ledger.training.run_ids()", lambda led: led.training.run_ids),
    "training_history": ("ledger.training.history()", lambda led: led.training.history),
    "training_rdp_curve": ("ledger.training.rdp_curve()", lambda led: led.training.rdp_curve),
    "training_accountant_in_use": (
        "ledger.training.accountant_in_use(accountant)",
        lambda led: led.training.accountant_in_use,
    ),
    "training_epsilon": ("ledger.training.epsilon(delta)", lambda led: led.training.epsilon),
    # checks and records of releases made elsewhere
    "check_validation_step": (
        "ledger.external.check(Gaussian(mu))",
        lambda led: lambda mu: led.external.check(Gaussian(mu)),
    ),
    "check_validation_mechanism": (
        "ledger.external.check(ValidationMechanism.from_rdp(description, rdp))",
        lambda led: lambda rdp: led.external.check(ValidationMechanism.from_rdp("(checked)", rdp)),
    ),
    "check_training_run": (
        "ledger.external.check(DPSGDRun.checked(noise_multiplier, sample_rate, steps))",
        lambda led: (
            lambda *, noise_multiplier, sample_rate, steps: led.external.check(
                DPSGDRun.checked(noise_multiplier, sample_rate, steps)
            )
        ),
    ),
    "check_training_mechanism": (
        "ledger.external.check(TrainingMechanism.from_rdp(description, rdp))",
        lambda led: lambda *, rdp: led.external.check(TrainingMechanism.from_rdp("(checked)", rdp)),
    ),
    "record_validation_step": (
        "ledger.external.record(Gaussian(mu), run_id=..., key=...)",
        lambda led: lambda mu, *, run_id, key: _record(led, Gaussian(mu), run_id, key),
    ),
    "record_validation_pure": (
        "ledger.external.record(PureDP(epsilon), run_id=..., key=...)",
        lambda led: lambda epsilon, *, run_id, key: _record(led, PureDP(epsilon), run_id, key),
    ),
    "record_validation_mechanism": (
        "ledger.external.record(ValidationMechanism.from_rdp(description, rdp), run_id=..., key=...)",
        lambda led: (
            lambda rdp, *, run_id, key, description: _record(
                led, ValidationMechanism.from_rdp(description, rdp), run_id, key
            )
        ),
    ),
    "record_training_run": (
        "ledger.external.record(DPSGDRun.checked(noise_multiplier, sample_rate, steps), run_id=...)",
        lambda led: (
            lambda *, run_id, noise_multiplier, sample_rate, steps: _record(
                led, DPSGDRun.checked(noise_multiplier, sample_rate, steps), run_id
            )
        ),
    ),
    "record_training_mechanism": (
        "ledger.external.record(TrainingMechanism.from_rdp(description, rdp), run_id=...)",
        lambda led: (
            lambda run_id, *, rdp, description: _record(led, TrainingMechanism.from_rdp(description, rdp), run_id)
        ),
    ),
}


def deprecated_attribute(ledger: PrivacyLedger, name: str) -> Any:
    r"""``ledger.<name>`` for an old ``name``, with a ``DeprecationWarning`` naming the new spelling;
    ``AttributeError`` for any other name.

    Args:
        ledger: The ledger.
        name: The attribute asked for (and not found on the ledger).
    """
    if name not in RENAMED:
        raise AttributeError(f"{type(ledger).__name__!r} object has no attribute {name!r}")
    new, read = RENAMED[name]
    warn_renamed(f"PrivacyLedger.{name}", new, stacklevel=4)  # the line that used the old name
    return read(ledger)
