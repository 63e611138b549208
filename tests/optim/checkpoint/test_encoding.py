r"""Exact JSON encodings of a checkpoint's values (botorch_dp/optim/checkpoint/encoding.py): tensors,
floats and generator states survive JSON bit for bit; damaged values are refused naming their field;
the fingerprint is the SHA-256 of the canonical JSON, so it ignores key order and sees every bit."""

import hashlib
import json
import math

import pytest
import torch

from botorch_dp.optim.checkpoint.encoding import (
    check_keys,
    float_from_json,
    generator_state_from_json,
    generator_to_json,
    is_int,
    json_fingerprint,
    tensor_from_json,
    tensor_to_json,
)


def _json(value):
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tensors_survive_json_bit_for_bit(dtype):
    t = (torch.randn(3, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64) / 3).to(dtype)
    t[0, 0] = 5e-324 if dtype == torch.float64 else 1e-45
    back = tensor_from_json(_json(tensor_to_json(t)), "x", (3, None))
    assert back.dtype == dtype and torch.equal(back, t)
    assert tensor_from_json(_json(tensor_to_json(torch.empty(0, 2, dtype=dtype))), "x").shape == (0, 2)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda o: {**o, "dtype": "int64"}, "'x': unsupported dtype 'int64'"),
        (lambda o: {**o, "shape": [2, 3]}, r"'x': shape \[2, 3\], expected \[3, None\]"),
        (lambda o: {**o, "hex": o["hex"][:-1]}, "'x': values do not match the shape"),
        (lambda o: {**o, "hex": ["0x1p+0"] * 5 + ["inf"]}, "'x': values must be finite"),
        (lambda o: {**o, "hex": ["0x1p+0"] * 5 + ["one"]}, "'x': a value is not a hex float"),
        (lambda o: {**o, "extra": 1}, r"'x': missing keys \[\], unknown keys \['extra'\]"),
    ],
)
def test_a_damaged_tensor_is_refused_naming_its_field(damage, match):
    good = tensor_to_json(torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match=match):
        tensor_from_json(damage(good), "x", (3, None))


def test_floats_and_generator_states_survive_json_exactly():
    for value in (0.1, -0.0, 1 / 3, 5e-324):
        assert float_from_json(_json(value.hex()), "f").hex() == value.hex()
    assert float_from_json(math.inf.hex(), "f", allow_inf=True) == math.inf
    for bad, match in [(math.inf.hex(), "must be finite"), (math.nan.hex(), "must be finite"), (0.5, "hex float")]:
        with pytest.raises(ValueError, match=f"'f'.*{match}"):
            float_from_json(bad, "f")
    gen = torch.Generator().manual_seed(9)
    state = generator_state_from_json(_json(generator_to_json(gen)), "g")
    assert torch.equal(state, gen.get_state()) and generator_state_from_json(None, "g") is None
    with pytest.raises(ValueError, match="'g': a CPU generator state has"):
        generator_state_from_json("AAAA", "g")


def test_the_fingerprint_is_the_sha256_of_the_canonical_json_and_ints_are_not_bools():
    a, b = {"x": [1, 2.5], "y": "z"}, {"y": "z", "x": [1, 2.5]}
    assert json_fingerprint(a) == json_fingerprint(b)
    assert json_fingerprint(a) == hashlib.sha256(b'{"x": [1, 2.5], "y": "z"}').hexdigest()
    assert json_fingerprint({"x": [1, 2.5000000000000004], "y": "z"}) != json_fingerprint(a)
    assert is_int(3) and not is_int(True) and not is_int(3.0)
    with pytest.raises(ValueError, match="'k': expected an object"):
        check_keys([], {"a"}, "k")
