r"""The strategies' registry: ``lookup_family`` checks the registered class against the family's type."""

import pytest

from botorch_dp.optim.options import SGD, AdaGrad, FixedClip, FullMatrixAdaGrad, Last, lookup, lookup_family, registered


def test_lookup_family_returns_the_registered_class_of_every_step_rule():
    for name, cls in registered("step_rule").items():
        assert lookup_family("step_rule", name, SGD) is cls is lookup("step_rule", name)
    assert {lookup_family("step_rule", n, SGD) for n in ("sgd", "adagrad", "adagrad_full")} == {
        SGD,
        AdaGrad,
        FullMatrixAdaGrad,
    }


def test_lookup_family_refuses_a_class_outside_the_family_type_and_an_unknown_name():
    with pytest.raises(TypeError, match=r"The clip strategy 'fixed' \(FixedClip\) does not derive from Last"):
        lookup_family("clip", "fixed", Last)
    with pytest.raises(ValueError, match=r"step_rule must be one of \['adagrad', 'adagrad_full', 'sgd'\].*got 'adam'"):
        lookup_family("step_rule", "adam", SGD, "step_rule")
    assert lookup_family("clip", "fixed", FixedClip) is FixedClip
