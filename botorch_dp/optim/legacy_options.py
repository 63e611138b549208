r"""The old flat option keywords of ``DPGIBOConfig``, kept working through this one module.

A config holds one strategy per family; before, each option was spread over flat fields
(``clip_bound="adaptive", clip_quantile=0.9``, ``batch_size=3``, ...). Here, and only here, those
keywords are read: ``DPGIBOConfig(clip_bound=2.0, ...)`` builds each family's strategy
(``strategies_from_flat``, one ``DeprecationWarning`` per family naming the new spelling),
``config.clip_bound`` reads, with a warning, from the strategy that holds it (``FLAT_FIELDS``), and
``dataclasses.replace(config, clip_bound=...)`` is a ``ValueError`` naming the new field (an old
keyword cannot say whether it should win over the config's own ``clip``). A checkpoint written
with the flat fields is migrated (``stored_config.migrate_flat_config``) by the same rule.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from botorch_dp.optim.deprecated import alias_property, warn_renamed
from botorch_dp.optim.options import (
    FixedClip,
    FullMatrixAdaGrad,
    NoFitting,
    NoProjection,
    PrivateGOE,
    Projected,
    QuantileClip,
    SensitiveFitting,
    batch_rule,
    build,
    is_strategy,
    resolve,
)
from botorch_dp.optim.options.noise import AdaptiveNorm

__all__ = ["FLAT_FIELDS", "FLAT_KINDS", "install_flat_keywords", "strategies_from_flat", "with_new_spelling"]

#: Each old keyword: the config field (family) that now holds it and the key of that
#: strategy's ``spec()`` it is (``None``: read by ``_read_flat``'s own rule).
FLAT_FIELDS: dict[str, tuple[str, str | None]] = {
    "clip_bound": ("clip", None),
    "clip_init": ("clip", "bound"),
    "clip_quantile": ("clip", "quantile"),
    "clip_learning_rate": ("clip", "learning_rate"),
    "clip_mu_fraction": ("clip", "fraction"),
    "noise_schedule": ("noise", "kind"),
    "max_iterations": ("noise", "max_iterations"),
    "norm_mu_fraction": ("noise", "norm_mu_fraction"),
    "snr_factor": ("noise", "snr_factor"),
    "max_step_mu": ("noise", "max_step_mu"),
    "subspace": ("projection", None),
    "subspace_acquisition": ("projection", "acquisition"),
    "preconditioner": ("step_rule", "preconditioner"),
    "preconditioner_mu_fraction": ("step_rule", "mu_fraction"),
    "selection_epsilon": ("selection", "epsilon"),
    "selection_mu": ("selection", "mu"),
    "loss_clip": ("selection", "loss_clip"),
    "batch_size": ("batches", "size"),
    "bias_tolerance": ("batches", "bias_tolerance"),
    "max_batch_size": ("batches", "max_size"),
    "batch_search": ("batches", "search"),
    "acqf_maxiter": ("batches", "maxiter"),
    "acqf_speed": ("batches", "speed"),
    "hyperparameter_fit": ("fitting", None),
}
#: The families whose kind is named by their own (new) field, ``step_rule="adagrad_full"``
#: and ``selection="exponential"``, the old keywords giving only its parameters.
FLAT_KINDS = ("step_rule", "selection")
_DEFAULT_NORM_MU_FRACTION = AdaptiveNorm().norm_mu_fraction


def _only_with(given: Mapping[str, Any], names: tuple[str, ...], used_with: str) -> None:
    for name in names:
        if given.get(name) is not None:
            raise ValueError(f"{name} is only used with {used_with}.")


def _clip(v: Mapping[str, Any], kind: Any) -> Any:
    bound = v.get("clip_bound", 1.0)
    params = ("clip_init", "clip_quantile", "clip_learning_rate", "clip_mu_fraction")
    if is_strategy(bound):
        _only_with(v, params, "clip_bound='adaptive' (give them in the QuantileClip)")
        return bound
    if isinstance(bound, str) and bound == "adaptive":
        return QuantileClip(**{str(FLAT_FIELDS[k][1]): v[k] for k in params if v.get(k) is not None})
    _only_with(v, params, "clip_bound='adaptive'")
    return FixedClip(bound)


def _noise(v: Mapping[str, Any], kind: Any) -> Any:
    schedule = v.get("noise_schedule", "fixed")
    params = ("max_iterations", "snr_factor", "max_step_mu")
    fraction = v.get("norm_mu_fraction")
    if isinstance(schedule, str) and schedule == "adaptive_norm":
        given = {k: v[k] for k in params if v.get(k) is not None}
        return AdaptiveNorm(_DEFAULT_NORM_MU_FRACTION if fraction is None else fraction, **given)
    used_with = "noise_schedule='adaptive_norm'"
    _only_with(v, params, used_with)
    if fraction is not None and fraction != _DEFAULT_NORM_MU_FRACTION:
        raise ValueError(f"norm_mu_fraction is only used with {used_with}.")
    return resolve("noise", schedule, "noise_schedule")


def _projection(v: Mapping[str, Any], kind: Any) -> Any:
    oracle, acquisition = v.get("subspace"), v.get("subspace_acquisition")
    if isinstance(oracle, Projected):
        if acquisition is not None and acquisition != oracle.acquisition:
            raise ValueError(f"subspace_acquisition = {acquisition!r} disagrees with subspace = {oracle!r}.")
        return oracle
    if oracle is None:
        if acquisition is not None and not isinstance(acquisition, bool):
            raise ValueError(f"subspace_acquisition must be True or False, got {acquisition!r}.")
        if acquisition:
            raise ValueError("subspace_acquisition=True needs a subspace (the basis the acquisition projects on).")
        return NoProjection()
    return Projected(oracle, False if acquisition is None else acquisition)


def _step_rule(v: Mapping[str, Any], kind: Any) -> Any:
    rule: Any = "sgd" if kind is None else kind
    preconditioner, fraction = v.get("preconditioner"), v.get("preconditioner_mu_fraction")
    name = rule.name if is_strategy(rule) else rule
    if not (isinstance(name, str) and name == "adagrad_full"):
        if preconditioner is not None:
            raise ValueError(f"preconditioner is only used with step_rule='adagrad_full', got step_rule={rule!r}.")
        _only_with(v, ("preconditioner_mu_fraction",), "preconditioner='private'")
        return resolve("step_rule", rule)
    if isinstance(preconditioner, str) and preconditioner == "private":
        return FullMatrixAdaGrad(PrivateGOE() if fraction is None else PrivateGOE(fraction))
    _only_with(v, ("preconditioner_mu_fraction",), "preconditioner='private'")
    return FullMatrixAdaGrad("noisy" if preconditioner is None else preconditioner)


def _selection(v: Mapping[str, Any], kind: Any) -> Any:
    rule: Any = "last" if kind is None else kind
    keywords = {str(FLAT_FIELDS[k][1]): (k, v.get(k)) for k in ("selection_epsilon", "selection_mu", "loss_clip")}
    # the rule checks its values (naming the old keywords)
    return build("selection", rule.name if is_strategy(rule) else rule, "selection", keywords, strict=True)


def _batches(v: Mapping[str, Any], kind: Any) -> Any:
    return batch_rule(**{str(FLAT_FIELDS[k][1]): value for k, value in v.items()})  # a keyword not given: its default


def _fitting(v: Mapping[str, Any], kind: Any) -> Any:
    fit = v.get("hyperparameter_fit")
    return NoFitting() if fit is None else SensitiveFitting(fit)


_BUILDERS = {
    "clip": _clip,
    "noise": _noise,
    "projection": _projection,
    "step_rule": _step_rule,
    "selection": _selection,
    "batches": _batches,
    "fitting": _fitting,
}


def strategies_from_flat(
    flat: Mapping[str, Any], kinds: Mapping[str, Any] | None = None, families: Iterable[str] | None = None
) -> dict[str, Any]:
    r"""The strategy of each family that ``flat`` (old keywords, decoded) gives a value for, or of each
    of ``families`` (a keyword not in ``flat``: its default); ``kinds``: the ``step_rule`` and
    ``selection`` (a name or a strategy) those keywords refine. A ``ValueError`` names the keyword
    that is wrong (as the flat fields' checks did)."""
    kinds = kinds or {}
    if families is None:
        families = {family for name, (family, _) in FLAT_FIELDS.items() if name in flat}
    return {
        family: _BUILDERS[family]({k: v for k, v in flat.items() if FLAT_FIELDS[k][0] == family}, kinds.get(family))
        for family in sorted(families)
    }


def _merge_flat(cls_name: str, kwargs: dict[str, Any], stacklevel: int = 4) -> None:
    r"""Replace the old keywords in ``kwargs`` by the strategies they give (warning once per family)."""
    flat = {name: kwargs.pop(name) for name in list(kwargs) if name in FLAT_FIELDS}
    if not flat:
        return
    kinds = {family: kwargs[family] for family in FLAT_KINDS if family in kwargs}
    for name in flat:
        family = FLAT_FIELDS[name][0]
        if family in FLAT_KINDS and is_strategy(kinds.get(family)):
            raise ValueError(
                f"{name} (deprecated) cannot change {family} = {kinds[family]!r}; give the whole {family} "
                f"strategy instead (with dataclasses.replace: replace(config, {family}=...))."
            )
    built = strategies_from_flat(flat, kinds)
    for family, strategy in built.items():
        old = sorted(name for name in flat if FLAT_FIELDS[name][0] == family)
        given = kwargs.get(family)
        if family not in FLAT_KINDS and given is not None and given != strategy:
            raise ValueError(
                f"{', '.join(old)} (deprecated) and {family} = {given!r} are both given; give {family} only "
                f"(with dataclasses.replace: replace(config, {family}=...))."
            )
        warn_renamed(f"{cls_name}({'=..., '.join(old)}=...)", f"{family}={strategy!r}", stacklevel + 1)
        kwargs[family] = strategy


def with_new_spelling(settings: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    r"""``{**defaults, **settings}`` as ``DPGIBOConfig`` keywords in the new spelling: a family's old
    keywords in ``settings`` replace that family's default and become its strategy (one
    ``DeprecationWarning`` per family, as ``DPGIBOConfig`` gives), e.g. for ``tune``'s settings."""
    flat_families = {FLAT_FIELDS[name][0] for name in settings if name in FLAT_FIELDS}
    merged = {k: v for k, v in (defaults or {}).items() if k not in flat_families or k in FLAT_KINDS}
    merged.update(settings)
    _merge_flat("DPGIBOConfig", merged, stacklevel=5)
    return merged


def _read_flat(config: Any, name: str) -> Any:
    r"""The value the old field ``name`` had, read off the strategy that holds it."""
    family, key = FLAT_FIELDS[name]
    strategy = getattr(config, family)
    spec = strategy.spec()
    if name == "clip_bound":
        return "adaptive" if spec["kind"] == "adaptive" else spec["bound"]
    if name.startswith("clip_"):
        return spec.get(key) if spec["kind"] == "adaptive" else None
    if name == "subspace":
        return getattr(strategy, "oracle", None)
    if name == "hyperparameter_fit":
        return getattr(strategy, "fit", None)
    if name == "subspace_acquisition":
        return spec.get(key, False)
    if name == "norm_mu_fraction":
        return spec.get(key, _DEFAULT_NORM_MU_FRACTION)
    return spec.get(key)


def install_flat_keywords(cls: type[Any]) -> None:
    r"""Let ``cls(old=...)`` take every old keyword of ``FLAT_FIELDS`` and ``obj.old`` read it,
    each with a ``DeprecationWarning`` that names the new spelling."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _merge_flat(cls.__name__, kwargs)
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    for name, (family, _) in FLAT_FIELDS.items():
        read = functools.partial(_read_flat, name=name)
        setattr(cls, name, alias_property(f"{cls.__name__}.{name}", f"{cls.__name__}.{family} (a strategy)", read))
