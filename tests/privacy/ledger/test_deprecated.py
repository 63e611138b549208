r"""The ledger's old method names (botorch_dp/privacy/ledger/deprecated.py): each still gives what its
new spelling gives, with a ``DeprecationWarning`` that names the new spelling and points at the line
that used it; an old record or check still records or refuses exactly as the new ones; any other
missing name is an ``AttributeError``; and nothing in the package, its tests, scripts, benchmarks or
tutorials uses an old name (an AST walk, which sees one inserted on purpose)."""

import ast
import math
import pickle
import re
import warnings
from pathlib import Path

import pytest

import botorch_dp
from botorch_dp.privacy.ledger import (
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    PureDP,
    TrainingMechanism,
    ValidationMechanism,
)
from botorch_dp.privacy.ledger.deprecated import RENAMED

ROOT = Path(botorch_dp.__file__).parent.parent
THIS = Path(__file__).resolve()
SHIM = "botorch_dp/privacy/ledger/deprecated.py"
PARTS = ("validation", "training", "external")


def _ledger():
    ledger = PrivacyLedger(validation_mu_budget=10.0, training_epsilon_budget=50.0, training_delta=1e-5)
    ledger.external.record(ApproximateDP("a selection", 1.0, 1e-7), run_id="sel")
    ledger.external.record(Gaussian(0.3), run_id="a", key="step-0000")
    ledger.external.record(PureDP(0.5), run_id="a", key="select")
    ledger.external.record(ValidationMechanism.from_rdp("hypo", lambda a: a / 8.0), run_id="h", key="select")
    ledger.external.record(DPSGDRun(noise_multiplier=1.1, sample_rate=0.01, steps=100), run_id=0)
    ledger.external.record(TrainingMechanism.from_rdp("amp", lambda a: a / 50.0), run_id="amp")
    return ledger


def _old(ledger, name, *args, **kwargs):
    r"""``ledger.<name>`` (called with the arguments when given), the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(ledger, name)
        if args or kwargs or callable(value):
            value = value(*args, **kwargs)
    return value, caught


#: Old read ↦ (its arguments, the new spelling as a function of the ledger).
READS = {
    "validation_records": (("a",), lambda led: led.validation.records("a")),
    "training_records": ((), lambda led: led.training.records()),
    "num_reservations": ((), lambda led: len(led.reservation_holders())),
    "has_run": (("h",), lambda led: bool(led.records(run_id="h"))),
    "validation_steps": (None, lambda led: led.validation.steps()),
    "validation_mechanisms": (None, lambda led: led.validation.mechanisms()),
    "validation_pure_epsilons": (None, lambda led: {("a", "select"): 0.5}),
    "validation_run_ids": ((), lambda led: led.validation.run_ids()),
    "validation_release_curves": ((), lambda led: led.validation.release_curves()),
    "validation_mu": (("a",), lambda led: led.validation.mu("a")),
    "validation_rdp_curve": ((), lambda led: led.validation.rdp_curve()),
    "validation_epsilon": ((1e-5,), lambda led: led.validation.epsilon(1e-5)),
    "remaining_validation_mu": ((), lambda led: led.validation.remaining_mu()),
    "check_admits": (({"grad": Gaussian(0.1)},), lambda led: None),
    "training_runs": (None, lambda led: led.training.runs()),
    "training_mechanisms": (None, lambda led: led.training.mechanisms()),
    "training_approximate": (None, lambda led: led.training.approximate()),
    "training_run_ids": ((), lambda led: led.training.run_ids()),
    "training_history": ((), lambda led: led.training.history()),
    "training_rdp_curve": ((), lambda led: led.training.rdp_curve()),
    "training_accountant_in_use": ((), lambda led: led.training.accountant_in_use()),
    "training_epsilon": ((1e-5,), lambda led: led.training.epsilon(1e-5)),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_an_old_read_gives_the_new_value_and_warns_naming_the_new_spelling(name):
    ledger = _ledger()
    args, new = READS[name]
    value, caught = _old(ledger, name, *(args or ()))
    assert value == new(ledger)
    assert len(caught) == 1 and caught[0].category is DeprecationWarning
    message = str(caught[0].message)
    assert message == f"PrivacyLedger.{name} is deprecated; use {RENAMED[name][0]} instead.", message
    assert Path(caught[0].filename).resolve() == THIS  # points at the line that used the old name


def test_old_records_and_checks_record_and_refuse_as_the_new_ones():
    old, new = PrivacyLedger(validation_mu_budget=2.0), PrivacyLedger(validation_mu_budget=2.0)
    for name, args, kwargs in [
        ("record_validation_step", (0.3,), {"run_id": "r", "key": "step-0000"}),
        ("record_validation_pure", (0.5,), {"run_id": "r", "key": "select"}),
        ("record_validation_mechanism", (lambda a: a / 800.0,), {"run_id": "r", "key": "x", "description": "d"}),
        ("record_training_run", (), {"run_id": 0, "noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 10}),
        ("record_training_mechanism", (1,), {"rdp": lambda a: a / 8.0, "description": "amp"}),
    ]:
        assert _old(old, name, *args, **kwargs)[0] is True
    new.external.record(Gaussian(0.3), run_id="r", key="step-0000")
    new.external.record(PureDP(0.5), run_id="r", key="select")
    new.external.record(ValidationMechanism.from_rdp("d", lambda a: a / 800.0), run_id="r", key="x")
    new.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.01, steps=10), run_id=0)
    new.external.record(TrainingMechanism.from_rdp("amp", lambda a: a / 8.0), run_id=1)
    strip = lambda records: [(r.side, r.run_id, r.key, r.event) for r in records]  # noqa: E731
    assert strip(old.records()) == strip(new.records())
    room = new.validation.remaining_mu()
    assert 0.0 < room < 2.0
    for ledger in (old, new):  # the same closed-form edge: room·(1 - 1e-6) fits, room·(1 + 1e-6) does not
        _old(ledger, "check_validation_step", room * (1 - 1e-6))
        with pytest.raises(PrivacyBudgetExceeded):
            _old(ledger, "check_validation_step", room * (1 + 1e-6))
        with pytest.raises(PrivacyBudgetExceeded):
            _old(ledger, "check_validation_mechanism", lambda a: 2.0 * a)  # α B²/2 on its own
        _old(ledger, "check_training_run", noise_multiplier=1.0, sample_rate=0.01, steps=10)  # no training budget
        _old(ledger, "check_training_mechanism", rdp=lambda a: a / 8.0)
    with pytest.raises(ValueError, match="sample_rate"):
        _old(old, "record_training_run", run_id=2, noise_multiplier=1.0, sample_rate=2.0, steps=10)
    assert len(old.records()) == 5


def test_a_name_that_never_existed_is_an_attribute_error_and_pickling_is_unchanged():
    ledger = PrivacyLedger()
    with pytest.raises(AttributeError, match="no attribute 'validation_nu'"):
        ledger.validation_nu  # noqa: B018
    assert not hasattr(ledger, "__setstate__")  # the look-ups of pickle and copy find no old name
    copy = pickle.loads(pickle.dumps(ledger))
    assert copy.records() == [] and copy.validation.mu() == 0.0 and math.isinf(copy.validation.remaining_mu())


# ------------------------------------------------------------------- nobody uses them
def _sources():
    paths = [*(ROOT / "botorch_dp").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    paths += [*(ROOT / "scripts").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    paths += [ROOT / "tutorials" / "_make_notebooks.py"]
    sources = {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted(paths) if p.exists()}
    names = re.compile("|".join(RENAMED))
    return {module: source for module, source in sources.items() if names.search(source)}  # only these can hold one


def _defined_elsewhere(sources):
    r"""Old names that other classes of the package define as their own (e.g. a tuning checkpoint's
    ``has_run``): an attribute of that name cannot be told apart by name, so the walk skips them."""
    found = set()
    for module, source in sources.items():
        if not module.startswith("botorch_dp/") or module.startswith("botorch_dp/privacy/ledger/"):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in RENAMED:
                found.add(node.name)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in RENAMED:
                found.add(node.target.id)
    return found


def old_name_uses(sources, skip=frozenset()):
    r"""``module:line name`` for every attribute named like an old ledger method, outside the shim
    and this test."""
    found = []
    for module, source in sorted(sources.items()):
        if module in (SHIM, "tests/privacy/ledger/test_deprecated.py"):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr in RENAMED and node.attr not in skip:
                if isinstance(node.value, ast.Attribute) and node.value.attr in PARTS:
                    continue  # a part's own method of the same name (``ledger.validation.check_admits``)
                found.append(f"{module}:{node.lineno} {node.attr}")
    return found


def test_nothing_in_the_package_or_the_tests_uses_an_old_name():
    sources = _sources()
    skip = _defined_elsewhere(sources)
    assert skip == {"has_run", "training_records"}  # TuneCheckpoint.has_run, TuneChecks.training_records
    assert old_name_uses(sources, skip) == []


def test_the_walk_sees_an_old_name_inserted_on_purpose():
    module = "botorch_dp/optim/report.py"
    source = (ROOT / module).read_text()
    assert old_name_uses({module: source}) == []
    inserts = ("ledger.validation_mu()", "x = opt.ledger.training_runs", "f(ledger.record_validation_step)")
    for inserted in (*inserts, "opt.ledger.check_admits(bound)"):
        found = old_name_uses({module: source + f"\n{inserted}\n"})
        assert len(found) == 1 and found[0].startswith(module), found
