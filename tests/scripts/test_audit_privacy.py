"""scripts/audit_privacy.py: JSON keys, exit status, a leak turns the exit status to 1, --rows and --jobs."""

import json

from botorch_dp.audit import AuditResult
from botorch_dp.audit.amp import audit_amp_release
from botorch_dp.audit.baselines import audit_score_release
from tests.helpers import loaded_script


def _small(leaky: bool, amp: bool = False, calls: list | None = None):
    def fake_audit_all(*, quick, seed, **kwargs):
        assert quick
        if calls is not None:
            calls.append(kwargs)
        honest = audit_score_release(num_runs=400, seed=seed)
        broken = audit_score_release(num_runs=400, per_trial_mu=4.0, seed=seed)
        if amp:
            return [honest, audit_amp_release(num_runs=400, seed=seed)]
        return [honest, AuditResult(**{**broken.to_dict(), "claimed_mu": 1.0})] if leaky else [honest]

    return fake_audit_all


def test_quick_json_output_and_exit_status(monkeypatch, capsys):
    with loaded_script("audit_privacy") as script:
        monkeypatch.setattr(script, "audit_all", _small(leaky=False))
        assert script.main(["--quick", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [set(r) for r in rows] == [{"mechanism", "claimed_mu", "empirical_mu", "empirical_mu_lower", "num_runs"}]
    assert rows[0]["empirical_mu_lower"] <= rows[0]["claimed_mu"]


def test_a_leak_fails_the_script(monkeypatch, capsys):
    with loaded_script("audit_privacy") as script:
        monkeypatch.setattr(script, "audit_all", _small(leaky=True))
        assert script.main(["--quick"]) == 1
    assert "LEAK" in capsys.readouterr().err


def test_amp_rows_carry_epsilon_at_delta(monkeypatch, capsys):
    with loaded_script("audit_privacy") as script:
        monkeypatch.setattr(script, "audit_all", _small(leaky=False, amp=True))
        assert script.main(["--quick", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert "delta" not in rows[0]  # GDP audits have no ε at δ
        amp = rows[1]
        assert amp["mechanism"] == "amp_release" and amp["delta"] == 1e-5
        assert amp["empirical_epsilon_lower"] <= amp["claimed_epsilon"]
        assert script.main(["--quick"]) == 0
    assert "amp_release: epsilon at delta = 1e-05: claimed 3.755" in capsys.readouterr().out


def test_rows_selects_the_rows_to_run(monkeypatch):
    calls = []
    with loaded_script("audit_privacy") as script:
        monkeypatch.setattr(script, "audit_all", _small(leaky=False, calls=calls))
        assert script.main(["--quick", "--json", "--rows", "gradient_release", "amp_release"]) == 0
        assert script.main(["--quick", "--json", "--jobs", "2"]) == 0
        assert script.main(["--quick", "--json"]) == 0
    assert calls == [{"names": ["gradient_release", "amp_release"]}, {"jobs": 2}, {}]
