"""scripts/audit_privacy.py: JSON keys, exit status, and a leak turns the exit status to 1."""

import json

from botorch_dp.privacy import audit
from helpers import loaded_script


def _small(leaky: bool, amp: bool = False):
    def fake_audit_all(*, quick, seed):
        assert quick
        honest = audit.audit_score_release(num_runs=400, seed=seed)
        broken = audit.audit_score_release(num_runs=400, per_trial_mu=4.0, seed=seed)
        if amp:
            return [honest, audit.audit_amp_release(num_runs=400, seed=seed)]
        return [honest, audit.AuditResult(**{**broken.to_dict(), "claimed_mu": 1.0})] if leaky else [honest]

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
    assert "amp_release: epsilon at delta = 1e-05: claimed 0.930" in capsys.readouterr().out
