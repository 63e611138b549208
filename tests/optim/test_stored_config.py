r"""A run's config as a checkpoint stores it (botorch_dp/optim/stored_config.py): values survive
their JSON form bit for bit (floats as ``float.hex``), a config and its kernel are rebuilt from the
stored JSON to the same stored form and fingerprint, a field added since a checkpoint was written
reads as its old value, and ``check_same_run`` refuses a changed field naming it while the fields
that may differ on resume pass."""

import dataclasses
import json
import math

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.stored_config import (
    check_same_run,
    config_from_json,
    config_to_json,
    decode_value,
    encode_value,
    with_added_fields,
)

from .loop_helpers import nl_config, normal_location


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
    assert rebuilt.clip_bound.hex() == (1 / 3).hex()
    assert _through_json(config_to_json(rebuilt)) == meta["config"]
    check_same_run(meta, rebuilt)  # the rebuilt kernel has the stored fingerprint
    assert config_from_json(meta["config"], gp, meta["kernel"], rebuild=False) is None
    renamed = {("clip" if k == "clip_bound" else k): v for k, v in meta["config"].items()}
    with pytest.raises(ValueError, match=r"missing fields \['clip_bound'\], unknown fields \['clip'\]"):
        config_from_json(renamed, gp, meta["kernel"], rebuild=True)


def test_a_changed_field_is_refused_naming_it_and_the_free_ones_pass(stored):
    cfg, meta, _ = stored
    for name, value in [("clip_bound", 0.5), ("num_iterations", 4), ("privacy_mu", 0.9)]:
        with pytest.raises(ValueError, match=f"Config field '{name}' differs from the checkpoint's"):
            check_same_run(meta, dataclasses.replace(cfg, **{name: value}))
    check_same_run(meta, dataclasses.replace(cfg, user_chunk_size=3, validation_mu_budget=5.0))


def test_fields_added_later_read_as_their_old_values():
    old = with_added_fields({"clip_bound": {"float": (1.0).hex()}})
    assert old["acqf_speed"] == "reference" and old["epsilon"] is None and old["delta"] is None
    assert old["noise_schedule"] == "fixed" and old["clip_bound"] == {"float": (1.0).hex()}
    assert with_added_fields({"acqf_speed": "fast"})["acqf_speed"] == "fast"
