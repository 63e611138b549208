r"""``tests/pin_compare.py``: exact fields stay bit for bit, tolerant fields take exactly their
tolerance (relative, with its absolute floor near 0), and a mismatch names the case, the field,
the index, both values and the tolerance."""

import math

import pytest

from tests.pin_compare import BLAS, EXACT, Tolerance, check_kernel_sets, compare


def _hex(*values: float) -> list[str]:
    return [float(v).hex() for v in values]


def test_an_exact_field_fails_on_one_last_bit_and_says_where():
    stored = {"batch_sizes": _hex(3.0, 2.0), "step_mus": _hex(0.25, 0.3)}
    compare({"batch_sizes": _hex(3.0, 2.0), "step_mus": _hex(0.25, 0.3)}, stored, "case", {})
    moved = math.nextafter(0.3, 1.0)
    with pytest.raises(AssertionError) as err:
        compare({"batch_sizes": _hex(3.0, 2.0), "step_mus": _hex(0.25, moved)}, stored, "case", {})
    message = str(err.value)
    for part in ("case: field step_mus at index [1]", moved.hex(), (0.3).hex(), repr(moved), "bit for bit"):
        assert part in message


def test_a_tolerant_field_takes_its_relative_tolerance_and_no_more():
    tolerances = {"iterates": BLAS}
    b = 0.7
    compare({"iterates": _hex(b * (1 + 0.9e-9))}, {"iterates": _hex(b)}, "c", tolerances)
    with pytest.raises(AssertionError, match=r"c: field iterates at index \[0\]: .*relative 1e-09 .*floor 1e-12"):
        compare({"iterates": _hex(b * (1 + 1.1e-9))}, {"iterates": _hex(b)}, "c", tolerances)
    with pytest.raises(AssertionError, match="bit for bit"):  # the same values under a field not in the table
        compare({"other": _hex(b * (1 + 0.9e-9))}, {"other": _hex(b)}, "c", tolerances)


def test_the_absolute_floor_holds_near_zero_only():
    tolerances = {"g": BLAS}
    compare({"g": _hex(3e-13)}, {"g": _hex(-5e-13)}, "c", tolerances)  # 8e-13 apart: under the floor
    with pytest.raises(AssertionError, match="field g"):
        compare({"g": _hex(1e-12)}, {"g": _hex(-1e-12)}, "c", tolerances)
    with pytest.raises(AssertionError, match="field g"):  # away from 0 the floor adds nothing noticeable
        compare({"g": _hex(1.0 + 3e-9)}, {"g": _hex(1.0)}, "c", tolerances)
    assert Tolerance(rel=1e-9, floor=1e-12).agrees(1e-3, 1e-3 + 1.9e-12)
    assert not Tolerance(rel=1e-9, floor=1e-12).agrees(1e-3, 1e-3 + 2.1e-12)


def test_structure_and_plain_values_are_exact_even_under_a_tolerance():
    tolerances = {"f": Tolerance(rel=0.5)}
    compare({"f": [["k", "Event", "nan"]]}, {"f": [["k", "Event", "nan"]]}, "c", tolerances)  # NaN pins NaN
    with pytest.raises(AssertionError, match=r"field f at index \[0, 0\]: got 'k2', stored 'k'"):
        compare({"f": [["k2", "Event", "nan"]]}, {"f": [["k", "Event", "nan"]]}, "c", tolerances)
    with pytest.raises(AssertionError, match="got 2 values, stored 1"):
        compare({"f": _hex(1.0, 1.0)}, {"f": _hex(1.0)}, "c", tolerances)
    with pytest.raises(AssertionError, match=r"keys \['f', 'g'\], stored \['f'\]"):
        compare({"f": [], "g": []}, {"f": []}, "c", tolerances)
    with pytest.raises(AssertionError, match="got 3, stored 2"):
        compare({"f": 3}, {"f": 2}, "c", tolerances)
    # a regression pin's field holds {"shape", "hex"}: the top-level key stays the field's name
    stored = {"theta": {"shape": [2], "hex": _hex(1.0, 2.0)}}
    compare({"theta": {"shape": [2], "hex": _hex(1.0, 2.0 * (1 + 1e-10))}}, stored, "r", {"theta": BLAS})
    with pytest.raises(AssertionError, match=r"r: field theta at index \[1\]"):
        compare({"theta": {"shape": [2], "hex": _hex(1.0, 2.1)}}, stored, "r", {"theta": BLAS})
    assert str(EXACT) == "bit for bit"


def test_the_kernel_sets_check_names_a_different_mkl_path(monkeypatch):
    check_kernel_sets()  # tests/conftest.py fixed both
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    with pytest.raises(pytest.fail.Exception, match="MKL_CBWR is 'AVX2'.*written with MKL_CBWR=COMPATIBLE"):
        check_kernel_sets()
