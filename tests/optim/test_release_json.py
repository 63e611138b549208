"""DPGIBOResult's one statement and JSON export (issue 32, item 1): the release in natural units
with its guarantee, strict JSON, no seed, NON-PRIVATE diagnostics only when asked; a short repr."""

import dataclasses
import json
import math

import pytest
import torch

from botorch_dp.optim import DPGIBO
from botorch_dp.optim.release_json import record_fields
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.tuning import Hyperparameter, SearchSpace

from .loop_helpers import nl_config, normal_location


def _strict(text: str):
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def run():
    _, objective = normal_location(n=40, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=5, record_non_private_diagnostics=True))
    return opt, opt.run(objective, progress=False)


def test_the_json_holds_the_release_and_its_guarantee_and_no_diagnostics_unless_asked(run, tmp_path):
    opt, result = run
    text = result.to_json(tmp_path / "release.json")
    out = _strict(text)
    assert _strict((tmp_path / "release.json").read_text()) == out
    release = result.release
    assert out["release"]["theta"] == release.theta.tolist()
    assert torch.equal(
        torch.tensor(out["release"]["released_gradients"], dtype=torch.float64), release.released_gradients
    )
    assert out["guarantee"]["this_run"]["mu"] == pytest.approx(1.0)
    assert out["guarantee"]["this_run"]["epsilon"] == pytest.approx(gdp_epsilon(1.0, release.guarantee.delta))
    assert out["guarantee"]["ledger"]["validation"]["epsilon"] == pytest.approx(release.guarantee.epsilon)
    assert "NON_PRIVATE_diagnostics" not in out and "seed" not in text.lower()
    with_diagnostics = _strict(result.to_json(include_diagnostics=True))
    assert with_diagnostics["NON_PRIVATE_diagnostics"]["clip_fractions"] == result.diagnostics.clip_fractions


def test_natural_units_by_name_with_a_search_space(run):
    _, result = run
    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Hyperparameter("momentum", 0.0, 0.99)])
    out = _strict(result.to_json(space=space))
    assert out["hyperparameters"] == pytest.approx(space.to_natural(result.release.theta))
    assert len(out["natural_iterates"]) == result.release.iterates.shape[0]
    with pytest.raises(ValueError, match="space has dim 1"):
        result.to_json(space=SearchSpace([Hyperparameter("lr", 1e-4, 1e-1)]))


def test_the_report_states_each_protected_set_in_words_and_the_repr_is_short(run):
    opt, result = run
    report = result.guarantee_report()
    assert report.startswith("What was protected:") and "validation users (replace one user's losses)" in report
    assert f"epsilon = {result.release.guarantee.epsilon:.4g}" in report and "3 Gaussian gradient releases" in report
    protected, unprotected = report.split("What was NOT protected:")
    assert "training records" not in protected  # nothing was trained privately here ...
    assert "training records: NO guarantee" in unprotected  # ... and the report says so
    assert len(repr(result)) < 200 and "3 steps" in repr(result) and "NON-PRIVATE diagnostics" in str(result)
    assert math.isfinite(result.release.guarantee.epsilon)


#: The keys of ``"release"`` users read (the flat layout before the strategies' records, issue 42),
#: written out here so that a record that stops giving one of them fails.
RELEASE_KEYS = {
    *("theta", "iterates", "evaluation_points", "batch_sizes", "posterior_traces", "released_gradients"),
    *("step_mus", "noise_stds", "noisy_norms", "norm_mus", "selected_index", "selection_scores"),
    *("clip_bounds", "clip_counts", "preconditioner_mus", "preconditioner_noise_stds", "subspace_dims"),
}


def test_each_record_gives_its_own_keys_and_the_release_keeps_the_keys_users_read(run):
    _, result = run
    release = result.release
    assert set(_strict(result.to_json())["release"]) == RELEASE_KEYS
    noise = release.records["noise"]
    assert record_fields("noise", noise) == {
        "step_mus": list(noise.step_mus),
        "noise_stds": list(noise.noise_stds),
        "noisy_norms": [],
        "norm_mus": [],
    }

    @dataclasses.dataclass(frozen=True)
    class UserRecord:  # a user's strategy's record without json_fields: its fields under its family
        weights: tuple[float, ...] = (0.5, 0.5)

    assert record_fields("noise", UserRecord()) == {"noise": {"weights": (0.5, 0.5)}}
    assert record_fields("noise", object()) == {}
