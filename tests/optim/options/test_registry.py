r"""The strategies' registry: every registered class implements its family's protocol (``missing_members``
names what a class lacks), ``lookup_family`` checks a registered class against the family's protocol
(or a plain base class), ``Options`` refuses a strategy of another family or one that lacks a member
of its protocol, naming the field, and the variants of a family compose by wrapping: no registered
strategy derives from another registered strategy of its family (except ``AdaGrad``, which is
``SGD`` with another ``torch.optim`` rule)."""

import itertools

import pytest

from botorch_dp.optim.options import (
    FAMILY_PROTOCOLS,
    SGD,
    AdaGrad,
    ClipPolicy,
    DecayingClip,
    FixedClip,
    FixedNoise,
    FullMatrixAdaGrad,
    IterateSelection,
    Last,
    Options,
    QuantileClip,
    StepPolicy,
    lookup,
    lookup_family,
    missing_members,
    registered,
)

#: Registered strategies that derive from another registered one of their family, on purpose.
SUBCLASSES = {(AdaGrad, SGD)}


@pytest.mark.parametrize("family", sorted(FAMILY_PROTOCOLS))
def test_every_registered_strategy_implements_its_familys_protocol(family):
    classes = registered(family)
    assert len(classes) >= 2
    for cls in classes.values():
        assert missing_members(cls, FAMILY_PROTOCOLS[family]) == (), cls


def test_missing_members_names_what_a_class_lacks_of_a_protocol():
    assert missing_members(FixedClip, IterateSelection) == ("charge", "evaluated", "index")
    assert missing_members(FixedClip, ClipPolicy) == () and missing_members(FixedClip(2.0), ClipPolicy) == ()

    class Partial:
        family, name = "clip", "partial"

        def __init__(self) -> None:
            self.mu_fraction = None  # an instance attribute counts for an instance

    missing = missing_members(Partial, ClipPolicy)
    assert "mu_fraction" in missing and "aggregate" in missing and "family" not in missing
    assert "mu_fraction" not in missing_members(Partial(), ClipPolicy)


def test_variants_compose_by_wrapping_not_by_deriving_from_each_other():
    for family in FAMILY_PROTOCOLS:
        for a, b in itertools.permutations(registered(family).values(), 2):
            assert not issubclass(a, b) or (a, b) in SUBCLASSES, (family, a, b)
    assert QuantileClip(2.0).base == FixedClip(2.0) and DecayingClip(2.0).base == FixedClip(2.0)


def test_lookup_family_returns_the_registered_class_of_every_step_rule():
    for name, cls in registered("step_rule").items():
        assert lookup_family("step_rule", name, StepPolicy) is cls is lookup("step_rule", name)
    assert {lookup_family("step_rule", n, StepPolicy) for n in ("sgd", "adagrad", "adagrad_full")} == {
        SGD,
        AdaGrad,
        FullMatrixAdaGrad,
    }


def test_lookup_family_refuses_a_class_outside_the_family_type_and_an_unknown_name():
    with pytest.raises(TypeError, match=r"'fixed' \(FixedClip\) does not implement IterateSelection: it lacks charge"):
        lookup_family("clip", "fixed", IterateSelection)
    with pytest.raises(TypeError, match=r"The clip strategy 'fixed' \(FixedClip\) does not derive from Last"):
        lookup_family("clip", "fixed", Last)
    with pytest.raises(
        ValueError, match=r"step_rule must be one of \['adagrad', 'adagrad_full', 'sgd'[^]]*\].*got 'adam'"
    ):
        lookup_family("step_rule", "adam", StepPolicy, "step_rule")
    assert lookup_family("clip", "fixed", FixedClip) is FixedClip


def test_options_refuses_a_strategy_of_another_family_or_one_that_lacks_a_member():
    with pytest.raises(TypeError, match=r"Options.clip needs a clip strategy .* got FixedNoise of family 'noise'"):
        Options(clip=FixedNoise())

    class Half:
        family, name = "clip", "half"

        def current(self, state):
            return 1.0

    with pytest.raises(TypeError, match=r"Options.clip: Half does not implement ClipPolicy; it lacks aggregate, "):
        Options(clip=Half())
