r"""The option fields of a ``DPGIBOConfig`` and the strategies they stand for
(botorch_dp/optim/config_options.py): each field is refused on its own naming it where it is not
used, the fields an option needs are filled with their documented defaults, the fields build the
strategies they describe, and a strategy object given in a field gives the same config as its
fields (a field given both ways must agree, naming both)."""

import pytest

from botorch_dp.optim.adaptive_clip import (
    DEFAULT_CLIP_INIT,
    DEFAULT_CLIP_LEARNING_RATE,
    DEFAULT_CLIP_MU_FRACTION,
    DEFAULT_CLIP_QUANTILE,
)
from botorch_dp.optim.config_options import build_options
from botorch_dp.optim.options import (
    AdaptiveNorm,
    Exponential,
    FixedClip,
    FixedNoise,
    FullMatrixAdaGrad,
    Last,
    NoisyLoss,
    PrivateGOE,
    QuantileClip,
)
from botorch_dp.optim.stored_config import config_to_json

from .loop_helpers import nl_config


def config(**kw):
    return nl_config(d=2, privacy_mu=1.0, **kw)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(clip_quantile=0.3), r"^clip_quantile is only used with clip_bound='adaptive'"),
        (dict(clip_bound="adaptive", clip_quantile=1.5), r"clip_quantile \(γ\)"),
        (dict(clip_bound="adaptive", clip_init=-1.0), r"clip_init \(B₀\)"),
        (dict(snr_factor=2.0), r"^snr_factor is only used with noise_schedule='adaptive_norm'"),
        (dict(norm_mu_fraction=0.3), r"^norm_mu_fraction is only used with noise_schedule='adaptive_norm'"),
        (dict(noise_schedule="adaptive_norm", max_iterations=0), r"max_iterations \(T_max\)"),
        (dict(noise_schedule="sometimes"), "noise_schedule"),
        (dict(subspace_acquisition=True), r"^subspace_acquisition=True needs a subspace"),
        (dict(subspace_acquisition=1), r"^subspace_acquisition must be True or False, got 1"),
        (dict(allow_noise_dominated="yes"), r"^allow_noise_dominated must be True or False, got 'yes'"),
        (dict(unsafe_allow_large_delta=None), r"^unsafe_allow_large_delta must be True or False"),
    ],
)
def test_each_option_field_is_refused_on_its_own_naming_it(kw, match):
    with pytest.raises(ValueError, match=match):
        config(**kw)


def test_an_options_fields_are_filled_with_their_defaults_and_build_its_strategies():
    adaptive = config(
        clip_bound="adaptive",
        noise_schedule="adaptive_norm",
        selection="exponential",
        selection_epsilon=0.5,
        loss_clip=2.0,
    )
    defaults = (DEFAULT_CLIP_INIT, DEFAULT_CLIP_QUANTILE, DEFAULT_CLIP_LEARNING_RATE, DEFAULT_CLIP_MU_FRACTION)
    fields = ("clip_init", "clip_quantile", "clip_learning_rate", "clip_mu_fraction")
    assert tuple(getattr(adaptive, name) for name in fields) == defaults
    options = build_options(adaptive)
    assert options.clip == QuantileClip(*defaults)
    assert options.noise == AdaptiveNorm(adaptive.norm_mu_fraction, None, None, None)
    assert options.selection == Exponential(0.5, 2.0)
    plain = build_options(config(clip_bound=3.0))
    assert (plain.clip, plain.noise, plain.selection) == (FixedClip(3.0), FixedNoise(), Last())
    private = config(step_rule="adagrad_full", preconditioner="private")
    assert private.preconditioner_mu_fraction == 0.5
    assert build_options(private).step_rule == FullMatrixAdaGrad(PrivateGOE(0.5))
    assert config(step_rule="adagrad_full").preconditioner == "noisy"


@pytest.mark.parametrize(
    ("strategy", "fields"),
    [
        (
            {"clip_bound": QuantileClip(2.0, 0.7, 0.1, 0.2)},
            dict(clip_bound="adaptive", clip_init=2.0, clip_quantile=0.7, clip_learning_rate=0.1, clip_mu_fraction=0.2),
        ),  # fmt: skip
        ({"clip_bound": FixedClip(4.0)}, dict(clip_bound=4.0)),
        (
            {"noise_schedule": AdaptiveNorm(0.2, 3.0)},
            dict(noise_schedule="adaptive_norm", norm_mu_fraction=0.2, snr_factor=3.0),
        ),  # fmt: skip
        (
            {"step_rule": FullMatrixAdaGrad(PrivateGOE(0.3))},
            dict(step_rule="adagrad_full", preconditioner="private", preconditioner_mu_fraction=0.3),
        ),  # fmt: skip
        ({"selection": NoisyLoss(0.4, 2.0)}, dict(selection="noisy_loss", selection_mu=0.4, loss_clip=2.0)),
    ],
)
def test_a_strategy_in_a_field_gives_the_config_of_its_fields(strategy, fields):
    given = config(**strategy)
    assert config_to_json(given) == config_to_json(config(**fields))
    assert build_options(given) == build_options(config(**fields))


def test_a_field_given_both_ways_must_agree_and_a_strategy_must_be_of_its_family():
    with pytest.raises(ValueError, match=r"^clip_quantile = 0.3 disagrees with clip_bound = QuantileClip"):
        config(clip_bound=QuantileClip(2.0, 0.7, 0.1, 0.2), clip_quantile=0.3)
    config(clip_bound=QuantileClip(2.0, 0.7, 0.1, 0.2), clip_quantile=0.7)  # the same value twice is fine
    with pytest.raises(ValueError, match=r"^clip_bound got a noise strategy \(AdaptiveNorm\)"):
        config(clip_bound=AdaptiveNorm())
