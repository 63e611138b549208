r"""The option fields of a ``DPGIBOConfig`` and the strategies they stand for (``optim.options``).

Each field is checked on its own here, naming it (``check_option_fields``); a strategy object
given in a field is read into the fields it stands for (``absorb_strategies``), so the config,
its checkpoint and ``dataclasses.replace`` keep one spelling; ``build_options`` makes the
strategies. (Each function takes the ``DPGIBOConfig`` being validated; this module does not
import it.) What the options need of each other is not checked here: the strategies declare
it and ``Options.check`` applies it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from botorch_dp.optim.adaptive_clip import (
    DEFAULT_CLIP_INIT,
    DEFAULT_CLIP_LEARNING_RATE,
    DEFAULT_CLIP_MU_FRACTION,
    DEFAULT_CLIP_QUANTILE,
)
from botorch_dp.optim.noise_schedule import DEFAULT_NORM_MU_FRACTION, NOISE_SCHEDULES
from botorch_dp.optim.options import (
    SGD,
    AdaptiveBatches,
    AdaptiveNorm,
    Exponential,
    FixedBatches,
    FixedClip,
    FixedNoise,
    FullMatrixAdaGrad,
    IterateSelection,
    Last,
    MinNoisyNorm,
    NoFitting,
    NoisyLoss,
    NoProjection,
    Options,
    PrivateGOE,
    Projected,
    QuantileClip,
    SensitiveFitting,
    StepPolicy,
    Strategy,
    lookup_family,
)
from botorch_dp.optim.selection import check_selection_fields
from botorch_dp.optim.step_rules import PRECONDITIONERS
from botorch_dp.optim.subspace import SubspaceOracle
from botorch_dp.privacy.checks import check_choice, check_positive, check_positive_int, check_probability

__all__ = ["absorb_strategies", "build_options", "check_option_fields", "set_field"]


def set_field(config: Any, name: str, value: Any) -> None:
    r"""Set a field of the frozen config while it is being validated."""
    object.__setattr__(config, name, value)


def check_option_fields(config: Any) -> None:
    r"""Each option field on its own (``ValueError`` naming it), normalized in place."""
    _check_subspace_fields(config)
    _check_noise_schedule_and_selection(config)
    _check_adaptive_clip(config)
    for name in ("unsafe_allow_large_delta", "allow_noise_dominated"):  # the opt-ins of optim.public_checks
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"{name} must be True or False, got {getattr(config, name)!r}.")


def _check_subspace_fields(config: Any) -> None:
    r"""``subspace``, ``subspace_acquisition``, ``preconditioner`` and ``preconditioner_mu_fraction``
    (Kairouz et al.), each on its own; normalized: ``"noisy"`` for ``adagrad_full`` without a
    preconditioner, ``0.5`` for the private one without a fraction. What they need of the other
    options (the private preconditioner: one basis, no moving bound or budget) the strategies
    declare (``optim.options.steps``)."""
    c = config
    if not isinstance(c.subspace_acquisition, bool):
        raise ValueError(f"subspace_acquisition must be True or False, got {c.subspace_acquisition!r}.")
    if c.subspace_acquisition and c.subspace is None:
        raise ValueError("subspace_acquisition=True needs a subspace (the basis the acquisition projects on).")
    if c.subspace is not None and not isinstance(c.subspace, SubspaceOracle):
        raise ValueError(f"subspace must be a SubspaceOracle (optim.subspace), got {type(c.subspace).__name__}.")
    preconditioner, fraction = c.preconditioner, c.preconditioner_mu_fraction
    if c.step_rule != "adagrad_full":
        if preconditioner is not None:
            raise ValueError(
                f"preconditioner is only used with step_rule='adagrad_full', got step_rule={c.step_rule!r}."
            )
    else:
        preconditioner = check_choice(
            "noisy" if preconditioner is None else preconditioner, "preconditioner", PRECONDITIONERS
        )
    if preconditioner != "private":
        if fraction is not None:
            raise ValueError("preconditioner_mu_fraction is only used with preconditioner='private'.")
    else:
        fraction = 0.5 if fraction is None else check_positive(fraction, "preconditioner_mu_fraction", allow_inf=False)
        if not fraction < 1.0:
            raise ValueError(f"preconditioner_mu_fraction must lie in (0, 1), got {fraction!r}.")
    set_field(c, "preconditioner", preconditioner)
    set_field(c, "preconditioner_mu_fraction", fraction)


#: The strategy classes each option field accepts (the ones whose fields it knows).
_FIELD_FAMILIES: dict[str, type | tuple[type, ...]] = {
    "clip_bound": (FixedClip, QuantileClip),
    "noise_schedule": (FixedNoise, AdaptiveNorm),
    "subspace": Projected,
    "step_rule": (SGD, FullMatrixAdaGrad),
    "selection": (Last, MinNoisyNorm, Exponential, NoisyLoss),
}

_ADAPTIVE_CLIP_FIELDS = {
    "clip_init": DEFAULT_CLIP_INIT,
    "clip_quantile": DEFAULT_CLIP_QUANTILE,
    "clip_learning_rate": DEFAULT_CLIP_LEARNING_RATE,
    "clip_mu_fraction": DEFAULT_CLIP_MU_FRACTION,
}


def _check_adaptive_clip(config: Any) -> None:
    r"""``clip_bound="adaptive"``'s fields: filled with their defaults and checked there, refused
    elsewhere (``ValueError`` naming the field)."""
    c = config
    if c.clip_bound != "adaptive":
        for name in _ADAPTIVE_CLIP_FIELDS:
            if getattr(c, name) is not None:
                raise ValueError(f"{name} is only used with clip_bound='adaptive'.")
        return
    for name, default in _ADAPTIVE_CLIP_FIELDS.items():
        if getattr(c, name) is None:
            set_field(c, name, default)
    set_field(c, "clip_init", check_positive(c.clip_init, "clip_init (B₀)", allow_inf=False))
    set_field(c, "clip_quantile", check_probability(c.clip_quantile, "clip_quantile (γ)"))
    set_field(
        c, "clip_learning_rate", check_positive(c.clip_learning_rate, "clip_learning_rate (η_C)", allow_inf=False)
    )
    set_field(c, "clip_mu_fraction", check_probability(c.clip_mu_fraction, "clip_mu_fraction (f_C)"))


def _check_noise_schedule_and_selection(config: Any) -> None:
    r"""Menart et al.'s fields: a known schedule and selection, their parameters only where
    they are used (``ValueError`` naming the field)."""
    c = config
    check_choice(c.noise_schedule, "noise_schedule", NOISE_SCHEDULES)
    if c.noise_schedule == "adaptive_norm":
        if c.max_iterations is not None:
            set_field(c, "max_iterations", check_positive_int(c.max_iterations, "max_iterations (T_max)"))
        set_field(c, "norm_mu_fraction", check_probability(c.norm_mu_fraction, "norm_mu_fraction (f_N)"))
        if c.snr_factor is not None:
            set_field(c, "snr_factor", check_positive(c.snr_factor, "snr_factor (c_snr)", allow_inf=False))
        if c.max_step_mu is not None:
            set_field(c, "max_step_mu", check_positive(c.max_step_mu, "max_step_mu (μ_max)", allow_inf=False))
    else:
        for name in ("max_iterations", "snr_factor", "max_step_mu"):
            if getattr(c, name) is not None:
                raise ValueError(f"{name} is only used with noise_schedule='adaptive_norm'.")
        if c.norm_mu_fraction != DEFAULT_NORM_MU_FRACTION:
            raise ValueError("norm_mu_fraction is only used with noise_schedule='adaptive_norm'.")
    checked = check_selection_fields(
        c.selection, selection_epsilon=c.selection_epsilon, selection_mu=c.selection_mu, loss_clip=c.loss_clip
    )
    for name, value in zip(("selection_epsilon", "selection_mu", "loss_clip"), checked, strict=True):
        set_field(c, name, value)


def build_options(config: Any) -> Options:
    r"""The strategies the checked fields describe (``optim.options``)."""
    c = config
    clip = (
        FixedClip(c.clip_bound)
        if c.clip_bound != "adaptive"
        else QuantileClip(c.clip_init, c.clip_quantile, c.clip_learning_rate, c.clip_mu_fraction)
    )
    noise = (
        FixedNoise()
        if c.noise_schedule == "fixed"
        else AdaptiveNorm(c.norm_mu_fraction, c.snr_factor, c.max_step_mu, c.max_iterations)
    )
    projection = NoProjection() if c.subspace is None else Projected(c.subspace, c.subspace_acquisition)
    if c.step_rule == "adagrad_full":
        preconditioner = PrivateGOE(c.preconditioner_mu_fraction) if c.preconditioner == "private" else c.preconditioner
        step_rule: StepPolicy = FullMatrixAdaGrad(preconditioner)
    else:
        step_rule = lookup_family("step_rule", c.step_rule, StepPolicy)()
    selections: dict[str, Callable[[], IterateSelection]] = {
        "last": Last,
        "min_noisy_norm": MinNoisyNorm,
        "exponential": lambda: Exponential(c.selection_epsilon, c.loss_clip),
        "noisy_loss": lambda: NoisyLoss(c.selection_mu, c.loss_clip),
    }
    selection = selections[c.selection]()
    search = dict(search=c.batch_search, maxiter=c.acqf_maxiter, speed=c.acqf_speed)
    batches = (
        FixedBatches(c.batch_size, **search)
        if c.bias_tolerance is None
        else AdaptiveBatches(None, bias_tolerance=c.bias_tolerance, max_size=c.max_batch_size, **search)
    )
    standardize = getattr(c.model, "outcome_transform", None) is not None
    sensitive = c.unsafe_allow_sensitive_fitting and (c.hyperparameter_fit is not None or standardize)
    fitting = SensitiveFitting(c.hyperparameter_fit, standardize) if sensitive else NoFitting()
    return Options(
        clip=clip,
        noise=noise,
        projection=projection,
        step_rule=step_rule,
        selection=selection,
        batches=batches,
        fitting=fitting,
    )


def absorb_strategies(config: Any) -> None:
    r"""A strategy object given in an option field (``clip_bound=QuantileClip(...)``,
    ``noise_schedule=AdaptiveNorm(...)``, ``subspace=Projected(...)``,
    ``step_rule=FullMatrixAdaGrad(PrivateGOE(0.3))``, ``selection=Exponential(...)``) becomes
    the fields it stands for, so the config, its checkpoint and ``dataclasses.replace`` see
    one spelling. A field given both ways must agree (``ValueError`` naming it)."""
    c = config
    for field, value in (
        ("clip_bound", c.clip_bound),
        ("noise_schedule", c.noise_schedule),
        ("subspace", c.subspace),
        ("step_rule", c.step_rule),
        ("selection", c.selection),
    ):
        if not isinstance(value, Strategy):
            continue
        if not isinstance(value, _FIELD_FAMILIES[field]):
            raise ValueError(f"{field} got a {value.family} strategy ({type(value).__name__}).")
        spec = value.spec()
        if field == "clip_bound" and value.name == "adaptive":
            implied = {
                "clip_bound": "adaptive",
                "clip_init": spec["bound"],
                "clip_quantile": spec["quantile"],
                "clip_learning_rate": spec["learning_rate"],
                "clip_mu_fraction": spec["fraction"],
            }
        elif field == "clip_bound":
            implied = {"clip_bound": spec["bound"]}
        elif field == "noise_schedule":
            implied = {"noise_schedule": value.name, **{k: v for k, v in spec.items() if k != "kind"}}
        elif field == "subspace" and isinstance(value, Projected):  # always (checked against _FIELD_FAMILIES)
            implied = {"subspace": value.oracle, "subspace_acquisition": value.acquisition}
        elif field == "step_rule" and value.name == "adagrad_full":
            implied = {
                "step_rule": value.name,
                "preconditioner": spec["preconditioner"],
                "preconditioner_mu_fraction": spec["mu_fraction"],
            }
        elif field == "step_rule":
            implied = {"step_rule": value.name}
        else:
            names = {"epsilon": "selection_epsilon", "mu": "selection_mu", "loss_clip": "loss_clip"}
            implied = {"selection": value.name, **{names[k]: v for k, v in spec.items() if k != "kind"}}
        defaults = {f.name: f.default for f in dataclasses.fields(type(c))}
        for name, implied_value in implied.items():
            given = getattr(c, name)
            if name != field and given is not defaults[name] and given != defaults[name] and given != implied_value:
                raise ValueError(f"{name} = {given!r} disagrees with {field} = {value!r}; give it in one place.")
            set_field(c, name, implied_value)
