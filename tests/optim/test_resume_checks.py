r"""The releases a resumed run has made, checked against its ledger (botorch_dp/optim/resume_checks.py):
a checkpoint whose ledger lost a step's record, or holds it at another μ than the config's ``μ_g/√T``,
is refused naming the release; ``recorded_mus`` keeps every retry. (The strategies' stored records are
checked by the strategies themselves: tests/optim/options/test_records.py.)"""

from __future__ import annotations

import json
import math

import pytest

from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.resume_checks import check_ledger_covers_steps, recorded_mus
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger, PureDP
from tests.optim.loop_helpers import normal_location
from tests.optim.loop_helpers import resume_config as _config

pytestmark = pytest.mark.usefixtures("quiet_seeds")  # tests/optim/conftest.py


def test_a_checkpoint_whose_ledger_lost_records_is_refused(tmp_path):
    r"""The defect: a consistently edited ``state.json`` with its ledger entries deleted resumed
    and reported μ 0.707 after 1.0 was spent. The checkpoint's ledger must record every
    release of the steps the run took."""
    _, objective = normal_location(n=12, d=2)
    opt = DPGIBO(_config(privacy_mu=1.0), checkpoint_dir=tmp_path)
    opt.run(objective, progress=False, callback=lambda info: info.iteration == 2)
    opt.close()
    path = tmp_path / ckpt.STATE_FILE
    state = json.loads(path.read_text())
    assert [e["key"] for e in state["ledger"]["validation_steps"]] == ["step-0000", "step-0001"]
    state["ledger"]["validation_steps"] = state["ledger"]["validation_steps"][:1]  # one step's record gone
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="lacks the release 'step-0001'"):
        DPGIBO.resume(tmp_path)
    state["ledger"]["validation_steps"][0]["mu"] = 0.01  # the right keys, a smaller charge
    state["ledger"]["validation_steps"].append(
        {**state["ledger"]["validation_steps"][0], "key": "step-0001", "release_id": "f" * 32}
    )
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="was not charged mu=0.5"):
        DPGIBO.resume(tmp_path)


def _ledger(*releases):
    ledger = PrivacyLedger()
    for key, mu in releases:
        ledger.external.record(Gaussian(mu), run_id="run", key=key)
    return ledger


def test_recorded_mus_keeps_every_retry_by_key():
    ledger = _ledger(("step-0000", 0.3), ("step-0000", 0.3), ("step-0001", 0.4))
    ledger.external.record(PureDP(0.5), run_id="run", key="select")
    ledger.external.record(Gaussian(0.9), run_id="other", key="step-0000")
    assert recorded_mus(ledger, "run") == {
        "step-0000": [0.3, 0.3],
        "step-0001": [0.4],
        "select": [pytest.approx(pure_dp_to_gdp_mu(0.5))],
    }


def test_the_ledger_must_hold_every_part_of_every_step_at_the_configs_mu():
    config = _config(privacy_mu=1.0)  # fixed schedule: μ_g/√T = 1/√4 per step
    per_step = 1.0 / math.sqrt(4)
    check_ledger_covers_steps(config, _ledger(("step-0000", per_step), ("step-0001", per_step)), "run", 2, None)
    with pytest.raises(ValueError, match="lacks the release 'step-0002' of run 'run'"):
        check_ledger_covers_steps(config, _ledger(("step-0000", per_step), ("step-0001", per_step)), "run", 3, None)
    # the μ of each record is the strategy's to check (FixedNoise.restore_state: tests/optim/options/test_records.py)
    check_ledger_covers_steps(config, _ledger(("step-0000", per_step), ("step-0001", 0.1)), "run", 2, None)
    adaptive_clip = _config(privacy_mu=1.0, clip_bound="adaptive")  # the count has its own key; the gradient /grad
    with pytest.raises(ValueError, match="lacks the release 'step-0000/grad'"):
        check_ledger_covers_steps(adaptive_clip, _ledger(("step-0000", per_step)), "run", 1, None)
    # the parts are the strategies' (their bound_parts): the private preconditioner adds "precond"
    private = _config(
        privacy_mu=1.0, step_rule="adagrad_full", preconditioner="private", preconditioner_mu_fraction=0.5
    )
    with pytest.raises(ValueError, match="lacks the release 'step-0000/precond'"):
        check_ledger_covers_steps(private, _ledger(("step-0000", per_step)), "run", 1, None)
    check_ledger_covers_steps(private, _ledger(("step-0000", per_step), ("step-0000/precond", 0.1)), "run", 1, None)
