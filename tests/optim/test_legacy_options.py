r"""The old flat option keywords of ``DPGIBOConfig`` (botorch_dp/optim/legacy_options.py): each is
refused on its own naming it where it is not used, a family's keywords give the strategy the new
spelling names (the same spec, the same released values), with one ``DeprecationWarning`` naming
that spelling, old attribute reads still work, a family given both ways must agree, and
``dataclasses.replace`` with an old keyword is a ``ValueError`` naming the new field."""

import dataclasses
import warnings

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.legacy_options import FLAT_FIELDS, strategies_from_flat
from botorch_dp.optim.options import (
    AdaptiveBatches,
    AdaptiveNorm,
    Exponential,
    FixedBatches,
    FixedClip,
    FixedNoise,
    FullMatrixAdaGrad,
    Last,
    NoFitting,
    NoisyLoss,
    NoProjection,
    PrivateGOE,
    Projected,
    QuantileClip,
    SensitiveFitting,
)
from botorch_dp.optim.options.clip import (
    DEFAULT_CLIP_INIT,
    DEFAULT_CLIP_LEARNING_RATE,
    DEFAULT_CLIP_MU_FRACTION,
    DEFAULT_CLIP_QUANTILE,
)
from botorch_dp.optim.stored_config import config_to_json
from botorch_dp.optim.subspace import FixedSubspace

from .loop_helpers import nl_config, normal_location


def config(**kw):
    return nl_config(d=2, privacy_mu=1.0, **kw)


def _fit(kernel, X, y):
    return None


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
        (dict(preconditioner="private"), r"^preconditioner is only used with step_rule='adagrad_full'"),
        (dict(selection="exponential", loss_clip=1.0), r"^selection='exponential' needs selection_epsilon"),
        (dict(max_batch_size=4), r"^max_batch_size \(b_max\) is only used with bias_tolerance"),
        (dict(batch_search=None), r"^batch_search must be one of"),
    ],
)
def test_each_old_keyword_is_refused_on_its_own_naming_it(kw, match):
    with pytest.raises(ValueError, match=match):
        config(**kw)


#: Each family's old keywords and the strategy the new spelling names.
OLD_AND_NEW = [
    (dict(clip_bound=4.0), dict(clip=FixedClip(4.0))),
    (
        dict(clip_bound="adaptive", clip_init=2.0, clip_quantile=0.7, clip_learning_rate=0.1, clip_mu_fraction=0.2),
        dict(clip=QuantileClip(2.0, 0.7, 0.1, 0.2)),
    ),
    (
        dict(noise_schedule="adaptive_norm", norm_mu_fraction=0.2, snr_factor=3.0, max_iterations=6),
        dict(noise=AdaptiveNorm(0.2, 3.0, None, 6)),
    ),
    (
        dict(step_rule="adagrad_full", preconditioner="noisy_debiased"),
        dict(step_rule=FullMatrixAdaGrad("noisy_debiased")),
    ),
    (
        dict(step_rule="adagrad_full", preconditioner="private", preconditioner_mu_fraction=0.3),
        dict(step_rule=FullMatrixAdaGrad(PrivateGOE(0.3))),
    ),
    (dict(selection="exponential", selection_epsilon=0.5, loss_clip=2.0), dict(selection=Exponential(0.5, 2.0))),
    (dict(selection="noisy_loss", selection_mu=0.4, loss_clip=2.0), dict(selection=NoisyLoss(0.4, 2.0))),
    (
        dict(batch_size=2, batch_search="greedy", acqf_maxiter=5, acqf_speed="reference"),
        dict(batches=FixedBatches(2, search="greedy", maxiter=5, speed="reference")),
    ),
    (
        dict(batch_size=None, bias_tolerance=0.5, max_batch_size=4),
        dict(batches=AdaptiveBatches(bias_tolerance=0.5, max_size=4)),
    ),
]


@pytest.mark.parametrize(("old", "new"), OLD_AND_NEW)
def test_old_keywords_give_the_strategy_of_the_new_spelling_with_a_warning_naming_it(old, new):
    ((family, strategy),) = new.items()
    with pytest.warns(DeprecationWarning, match=rf"is deprecated; use {family}={type(strategy).__name__}\(") as got:
        given = config(**old)
    assert got[0].filename.endswith("loop_helpers.py")  # points at the caller (nl_config builds the config)
    assert getattr(given, family) == strategy and getattr(given, family).spec() == strategy.spec()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new spelling does not warn
        spelled = config(**new)
    assert config_to_json(given) == config_to_json(spelled)
    assert given.options == spelled.options
    for name, value in old.items():  # the old reads still work (with a warning)
        if name not in ("step_rule", "selection"):
            read = rf"DPGIBOConfig.{name} is deprecated; use DPGIBOConfig.{FLAT_FIELDS[name][0]} \(a strategy\)"
            with pytest.warns(DeprecationWarning, match=read):
                assert getattr(spelled, name) == value


def test_the_defaults_of_the_old_keywords_are_the_strategies_defaults():
    adaptive = config(clip_bound="adaptive", noise_schedule="adaptive_norm")
    assert adaptive.clip == QuantileClip(
        DEFAULT_CLIP_INIT, DEFAULT_CLIP_QUANTILE, DEFAULT_CLIP_LEARNING_RATE, DEFAULT_CLIP_MU_FRACTION
    )
    assert adaptive.noise == AdaptiveNorm()
    assert config(step_rule="adagrad_full", preconditioner="private").step_rule == FullMatrixAdaGrad(PrivateGOE(0.5))
    plain = strategies_from_flat({"subspace": None, "hyperparameter_fit": None, "batch_size": None})
    assert plain == {"projection": NoProjection(), "fitting": NoFitting(), "batches": FixedBatches()}
    assert config().clip == FixedClip(10.0) and config().noise == FixedNoise() and config().selection == Last()
    oracle = FixedSubspace(torch.eye(2)[:, :1])
    projected = config(subspace=oracle, subspace_acquisition=True)
    assert projected.projection == Projected(oracle, True) and projected.projection.oracle is oracle
    fitted = config(hyperparameter_fit=_fit, unsafe_allow_sensitive_fitting=True)
    assert fitted.fitting == SensitiveFitting(_fit)
    with pytest.warns(DeprecationWarning):
        assert fitted.hyperparameter_fit is _fit and projected.subspace is oracle


def test_every_old_keyword_is_read_off_one_family():
    assert set(FLAT_FIELDS) == {
        *("clip_bound", "clip_init", "clip_quantile", "clip_learning_rate", "clip_mu_fraction"),
        *("noise_schedule", "max_iterations", "norm_mu_fraction", "snr_factor", "max_step_mu"),
        *("subspace", "subspace_acquisition", "preconditioner", "preconditioner_mu_fraction"),
        *("selection_epsilon", "selection_mu", "loss_clip"),
        *("batch_size", "bias_tolerance", "max_batch_size", "batch_search", "acqf_maxiter", "acqf_speed"),
        "hyperparameter_fit",
    }
    families = {family for family, _ in FLAT_FIELDS.values()}
    assert families == set(config().options.describe())


def test_a_family_given_both_ways_must_agree_and_replace_with_an_old_keyword_names_the_new_field():
    with pytest.raises(
        ValueError, match=r"^clip_bound, clip_quantile \(deprecated\) and clip = QuantileClip.*give clip only"
    ):
        config(clip=QuantileClip(2.0, 0.7, 0.1, 0.2), clip_bound="adaptive", clip_quantile=0.3)
    with pytest.raises(ValueError, match=r"^clip_quantile is only used with clip_bound='adaptive' \(give them in"):
        config(clip_bound=QuantileClip(2.0, 0.7, 0.1, 0.2), clip_quantile=0.3)
    assert config(clip=FixedClip(3.0), clip_bound=3.0).clip == FixedClip(3.0)  # the same value twice is fine
    with pytest.raises(ValueError, match=r"^clip must be a clip strategy .* got AdaptiveNorm"):
        config(clip_bound=AdaptiveNorm())
    base = config(batches=FixedBatches(3))
    with pytest.raises(ValueError, match=r"replace\(config, batches=\.\.\.\)"):
        dataclasses.replace(base, batch_search="greedy")
    with pytest.raises(ValueError, match=r"replace\(config, clip=\.\.\.\)"):
        dataclasses.replace(base, clip_bound=2.0)
    with pytest.raises(ValueError, match=r"cannot change selection = Exponential.*replace\(config, selection=\.\.\.\)"):
        dataclasses.replace(config(selection=Exponential(0.5, 2.0)), loss_clip=3.0)
    assert dataclasses.replace(base, clip=2.0).clip == FixedClip(2.0)  # the new spelling


def test_old_and_new_spellings_release_the_same_values_on_a_tiny_run():
    old = dict(
        clip_bound="adaptive",
        clip_quantile=0.6,
        noise_schedule="adaptive_norm",
        selection="noisy_loss",
        selection_mu=0.3,
        loss_clip=5.0,
        batch_size=2,
    )
    new = dict(
        clip=QuantileClip(quantile=0.6),
        noise="adaptive_norm",
        selection=NoisyLoss(0.3, 5.0),
        batches=FixedBatches(2),
    )
    releases = []
    for settings in (old, new):
        _, objective = normal_location(n=40, d=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = DPGIBO(config(num_iterations=3, seed=4, **settings))
            releases.append(opt.run(objective, progress=False).release)
    a, b = releases
    assert torch.equal(a.released_gradients, b.released_gradients) and torch.equal(a.iterates, b.iterates)
    assert a.clip_bounds == b.clip_bounds and a.step_mus == b.step_mus and a.selected_index == b.selected_index
