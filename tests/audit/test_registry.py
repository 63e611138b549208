"""The audit package's layout and registry (botorch_dp/audit/registry.py): rows run in
registration order by audit_all, names are unique, and the bottom layer does not import the audits."""

import ast
from pathlib import Path

import pytest

import botorch_dp
from botorch_dp.audit import registry
from botorch_dp.audit.statistics import AuditResult

PACKAGE = Path(botorch_dp.__file__).parent


def fake_audit(*, num_runs, seed, name, scale=1.0):
    return AuditResult(name, 1.0, scale * num_runs, 0.0, num_runs, 0.0, 0.0, 0.0, 0.95)


@pytest.fixture
def only_fake_rows(monkeypatch):
    import botorch_dp.audit  # noqa: F401  (registers the real rows first, so they can be set aside)

    monkeypatch.setattr(registry, "_REGISTRY", {})
    registry.audit_row("first", quick=4, full=10)(fake_audit)
    registry.audit_row("second", quick=6, full=20, scale=2.0)(fake_audit)


def test_audit_all_runs_the_rows_in_order_with_their_options_and_times_them(only_fake_rows):
    results = registry.audit_all(quick=True)
    assert [(r.mechanism, r.num_runs, r.empirical_mu) for r in results] == [("first", 4, 4.0), ("second", 6, 12.0)]
    assert all(r.seconds is not None and r.seconds >= 0 for r in results)
    assert [r.num_runs for r in registry.audit_all(quick=False)] == [10, 20]
    assert [r.mechanism for r in registry.audit_all(names=["second"])] == ["second"]
    with pytest.raises(ValueError, match="Unknown audit rows"):
        registry.audit_all(names=["third"])


def test_rows_run_in_worker_processes_give_the_same_results():
    # two cheap real rows in two spawned processes (each imports the registry itself)
    names = ["noisy_gd_adaptive_norm", "dp_hypo_score"]
    here = registry.audit_all(quick=True, names=names)
    there = registry.audit_all(quick=True, names=names, jobs=2)
    strip = lambda r: {**r.to_dict(), "seconds": None}  # noqa: E731
    assert [strip(r) for r in there] == [strip(r) for r in here]


def test_a_row_name_is_registered_once(only_fake_rows):
    registry.audit_row("first", quick=4, full=10)(fake_audit)  # the same function again: harmless
    with pytest.raises(ValueError, match="already registered"):
        registry.audit_row("first", quick=4, full=10)(lambda **kwargs: None)


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_privacy_does_not_import_the_audits_or_the_layers_above():
    above = ("botorch_dp.audit", "botorch_dp.optim", "botorch_dp.baselines", "botorch_dp.training")
    for path in sorted((PACKAGE / "privacy").rglob("*.py")):
        bad = [m for m in imported_modules(path) if m.startswith(above)]
        assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"
    assert not (PACKAGE / "privacy" / "audit.py").exists()


def test_no_audit_module_is_over_500_lines():
    for path in sorted((PACKAGE / "audit").glob("*.py")):
        assert len(path.read_text().splitlines()) <= 500, path.name
