r"""A run's config as a checkpoint stores it (botorch_dp/optim/stored_config.py): values survive
their JSON form bit for bit (floats as ``float.hex``), each option family is stored as its
strategy's spec, a config and its kernel are rebuilt from the stored JSON to the same stored form
and fingerprint, a field added since a checkpoint was written reads as its old value, a config
stored with the flat option fields (before issue 42) is migrated to the same specs, and
``check_same_run`` refuses a changed field naming it while the fields that may differ on resume
pass."""

import dataclasses
import json
import math
import warnings

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options import (
    AdaptiveBatches,
    AdaptiveNorm,
    Exponential,
    FixedBatches,
    FixedClip,
    FullMatrixAdaGrad,
    NoisyLoss,
    PrivateGOE,
    Projected,
    QuantileClip,
    SensitiveFitting,
)
from botorch_dp.optim.stored_config import (
    check_same_run,
    config_from_json,
    config_to_json,
    decode_value,
    encode_value,
    migrate_flat_config,
    with_added_fields,
)
from botorch_dp.optim.subspace import FixedSubspace

from .loop_helpers import nl_config, normal_location
from .state_helpers import flat_config_json


def _through_json(value):
    return json.loads(json.dumps(value))


def test_values_survive_their_json_form_bit_for_bit():
    floats = [0.1, 1 / 3, math.pi * 1e-300, 5e-324, -0.0, math.inf, 2.0**60 + 1.0]
    decoded = decode_value(_through_json(encode_value(floats)), "x")
    assert [float(v).hex() for v in decoded] == [v.hex() for v in floats]
    tensor = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) / 3
    back = decode_value(_through_json(encode_value(tensor)), "x")
    assert back.dtype == torch.float64 and torch.equal(back, tensor)
    nested = {"a": [1, True, None, "s"], 2: {"float": 0.5}}
    assert decode_value(_through_json(encode_value(nested)), "x") == {"a": [1, True, None, "s"], 2: {"float": 0.5}}
    with pytest.raises(TypeError, match="object cannot be stored exactly"):
        encode_value(object())
    with pytest.raises(ValueError, match="Checkpoint field 'config.x': unknown value"):
        decode_value({"complex": [1, 2]}, "config.x")


@pytest.fixture(scope="module")
def stored():
    _, objective = normal_location(n=10, d=2)
    cfg = nl_config(d=2, privacy_mu=1.0, clip_bound=1 / 3, num_iterations=3, seed=9)
    opt = DPGIBO(cfg)
    X = opt.ask()
    opt.tell(X, objective(X))
    return cfg, _through_json(opt.state_dict()["meta"]), opt.state_dict()["gp"]


def test_a_config_is_rebuilt_from_its_stored_json_to_the_same_stored_form(stored):
    cfg, meta, gp = stored
    assert meta["config"] == _through_json(config_to_json(cfg))
    rebuilt = config_from_json(meta["config"], gp, meta["kernel"], rebuild=True)
    assert rebuilt.clip == FixedClip(1 / 3) and rebuilt.clip.bound.hex() == (1 / 3).hex()
    assert meta["config"]["clip"] == encode_value({"kind": "fixed", "bound": 1 / 3})  # the strategy's spec
    assert _through_json(config_to_json(rebuilt)) == meta["config"]
    check_same_run(meta, rebuilt)  # the rebuilt kernel has the stored fingerprint
    assert config_from_json(meta["config"], gp, meta["kernel"], rebuild=False) is None
    renamed = {("noise_model" if k == "noise" else k): v for k, v in meta["config"].items()}
    with pytest.raises(ValueError, match=r"missing fields \['noise'\], unknown fields \['noise_model'\]"):
        config_from_json(renamed, gp, meta["kernel"], rebuild=True)


def test_a_changed_field_is_refused_naming_it_and_the_free_ones_pass(stored):
    cfg, meta, _ = stored
    for name, value in [
        ("clip", FixedClip(0.5)),
        ("num_iterations", 4),
        ("privacy_mu", 0.9),
        ("noise", "adaptive_norm"),
    ]:
        with pytest.raises(ValueError, match=f"Config field '{name}' differs from the checkpoint's"):
            check_same_run(meta, dataclasses.replace(cfg, **{name: value}))
    free = dataclasses.replace(cfg.batches, speed="reference")  # public computation only
    check_same_run(meta, dataclasses.replace(cfg, user_chunk_size=3, validation_mu_budget=5.0, batches=free))


def test_fields_added_later_read_as_their_old_values():
    old = with_added_fields({"clip_bound": {"float": (1.0).hex()}})
    assert old["acqf_speed"] == "reference" and old["epsilon"] is None and old["delta"] is None
    assert old["clip_bound"] == {"float": (1.0).hex()} and "noise_schedule" not in old  # migrated as its default
    assert with_added_fields({"acqf_speed": "fast"})["acqf_speed"] == "fast"


def _hex(x):
    return {"float": float(x).hex()}


def test_a_flat_config_written_by_hand_migrates_to_the_specs_of_its_strategies():
    # the last flat format (issue 43), every option set away from its default, written out by hand
    cfg = nl_config(
        d=2,
        privacy_mu=1.0,
        num_iterations=3,
        clip=QuantileClip(2.0, 0.7, 0.1, 0.2),
        noise=AdaptiveNorm(0.2, 3.0, None, 5),
        selection=Exponential(0.5, 2.0),
        batches=AdaptiveBatches(bias_tolerance=0.05, max_size=4, search="greedy", maxiter=9, speed="reference"),
    )
    flat = {k: v for k, v in config_to_json(cfg).items() if k not in cfg.options.describe()}
    flat.update(
        clip_bound="adaptive",
        clip_init=_hex(2.0),
        clip_quantile=_hex(0.7),
        clip_learning_rate=_hex(0.1),
        clip_mu_fraction=_hex(0.2),
        noise_schedule="adaptive_norm",
        norm_mu_fraction=_hex(0.2),
        snr_factor=_hex(3.0),
        max_step_mu=None,
        max_iterations=5,
        subspace=None,
        subspace_acquisition=False,
        step_rule="sgd",
        preconditioner=None,
        preconditioner_mu_fraction=None,
        selection="exponential",
        selection_epsilon=_hex(0.5),
        selection_mu=None,
        loss_clip=_hex(2.0),
        batch_size=None,
        bias_tolerance=_hex(0.05),
        max_batch_size=4,
        batch_search="greedy",
        acqf_maxiter=9,
        acqf_speed="reference",
        hyperparameter_fit=None,
    )
    flat = _through_json(flat)
    assert migrate_flat_config(flat) == _through_json(config_to_json(cfg))
    assert migrate_flat_config(migrate_flat_config(flat)) == migrate_flat_config(flat)  # specs stay as they are
    # a schema-1 config (renamed fields, none of the option fields added since) reads as the defaults
    v1 = {k: v for k, v in flat.items() if k not in ("epsilon", "delta", "unsafe_allow_large_delta")}
    v1 = {k: v for k, v in v1.items() if k not in ("allow_noise_dominated", "acqf_maxiter", "acqf_speed")}
    for name in ("noise_schedule", "norm_mu_fraction", "snr_factor", "max_step_mu", "max_iterations", "selection"):
        del v1[name]
    for name in ("selection_epsilon", "selection_mu", "loss_clip", "subspace", "subspace_acquisition"):
        del v1[name]
    for name in ("preconditioner", "preconditioner_mu_fraction", "clip_init", "clip_quantile", "clip_learning_rate"):
        del v1[name]
    del v1["clip_mu_fraction"]
    v1.update(clip_bound=_hex(1.5), bias_tolerance=None, max_batch_size=None, batch_size=3)
    v1["batch_selection"] = v1.pop("batch_search")
    migrated = migrate_flat_config(v1)
    assert decode_value(migrated["clip"], "clip") == {"kind": "fixed", "bound": 1.5}
    assert decode_value(migrated["noise"], "noise") == {"kind": "fixed"}
    assert decode_value(migrated["selection"], "selection") == {"kind": "last"}
    batches = {"kind": "fixed", "size": 3, "search": "greedy", "maxiter": None, "speed": "reference"}
    assert decode_value(migrated["batches"], "batches") == batches  # before issue 33: the reference search
    assert decode_value(migrated["step_rule"], "step_rule") == {"kind": "sgd"}
    assert decode_value(migrated["projection"], "projection") == {"kind": "none"}
    for name in ("clip_bound", "step_rule", "hyperparameter_fit"):  # held by every flat config
        with pytest.raises(ValueError, match=rf"'config': missing fields \['{name}'\]"):
            migrate_flat_config({k: v for k, v in v1.items() if k != name})


def test_a_flat_checkpoint_resumes_with_its_strategies_and_refuses_a_changed_one():
    _, objective = normal_location(n=10, d=2)
    cfg = nl_config(
        d=2,
        privacy_mu=1.0,
        num_iterations=3,
        seed=9,
        projection=Projected(FixedSubspace(torch.eye(2)[:, :1])),
        step_rule=FullMatrixAdaGrad(PrivateGOE(0.3)),
        selection=NoisyLoss(0.2, 3.0),
    )
    opt = DPGIBO(cfg)
    X = opt.ask()
    opt.tell(X, objective(X))
    state = opt.state_dict()
    meta = _through_json({**state["meta"], "config": flat_config_json(cfg)})  # as written before issue 42
    assert "clip" not in meta["config"] and meta["config"]["preconditioner"] == "private"
    rebuilt = config_from_json(meta["config"], state["gp"], meta["kernel"], rebuild=True)
    assert rebuilt.options.describe().keys() == cfg.options.describe().keys()
    assert [rebuilt.step_rule, rebuilt.selection] == [cfg.step_rule, cfg.selection]
    assert torch.equal(rebuilt.projection.oracle.basis, cfg.projection.oracle.basis)
    check_same_run(meta, cfg)
    for name, value in [("step_rule", FullMatrixAdaGrad(PrivateGOE(0.4))), ("selection", NoisyLoss(0.2, 2.0))]:
        with pytest.raises(ValueError, match=f"Config field '{name}' differs from the checkpoint's"):
            check_same_run(meta, dataclasses.replace(cfg, **{name: value}))
    other = DPGIBO(cfg)
    other.load_state_dict({**state, "meta": meta})
    assert torch.equal(other.theta, opt.theta) and other.iteration == 1


def test_a_stored_callable_fit_is_migrated_by_kind_and_needs_the_config():
    with pytest.raises(ValueError, match="unsafe_allow_sensitive_fitting"):
        nl_config(d=2, privacy_mu=1.0, fitting=SensitiveFitting(lambda k, x, y: None))
    flat = flat_config_json(nl_config(d=2, privacy_mu=1.0))
    flat["hyperparameter_fit"] = {"object": "function"}
    migrated = migrate_flat_config(_through_json(flat))
    assert decode_value(migrated["fitting"], "fitting") == {
        "kind": "sensitive",
        "fit": "function",
        "standardize": False,
    }
    fitted = nl_config(
        d=2, privacy_mu=1.0, fitting=SensitiveFitting(lambda k, x, y: None), unsafe_allow_sensitive_fitting=True
    )
    assert _through_json(config_to_json(fitted))["fitting"] == migrated["fitting"]  # only the kind is stored
    with pytest.raises(ValueError, match=r"'fitting' with a callable \(function\).*pass the config"):
        config_from_json(
            migrated, {}, {"spec": 0, "fingerprint": 0, "noise_variance": 0, "standardize": 0}, rebuild=True
        )


class _FitA:
    r"""A user's kernel fit (never called here; the spec names its class)."""

    def __call__(self, kernel, X, y):
        pass


class _FitB(_FitA):
    r"""Another one."""


def test_each_strategy_says_which_keys_of_its_spec_a_resume_tolerates(stored):
    r"""``resume_tolerates`` (no list of families in the comparison): the batch search's speed may
    differ, the unsafe fitting's callable is compared only by whether one is given."""
    cfg, meta, _ = stored
    assert FixedBatches().resume_tolerates == {"speed": "any"} and FixedClip().resume_tolerates == {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = dataclasses.replace(cfg, fitting=SensitiveFitting(_FitA()), unsafe_allow_sensitive_fitting=True)
        fitted_meta = {**meta, "config": _through_json(config_to_json(fitted))}
        assert _through_json(config_to_json(fitted))["fitting"] != _through_json(
            config_to_json(dataclasses.replace(fitted, fitting=SensitiveFitting(_FitB())))
        )
        check_same_run(fitted_meta, dataclasses.replace(fitted, fitting=SensitiveFitting(_FitB())))  # another fit
        with pytest.raises(ValueError, match="Config field 'fitting' differs"):
            check_same_run(fitted_meta, dataclasses.replace(fitted, fitting=SensitiveFitting(None)))
