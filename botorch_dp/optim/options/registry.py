r"""The strategies' registry: option names and a checkpoint's specs resolve here.

A strategy class registers under its family and name with ``@register("noise", "adaptive_norm")``;
``resolve`` turns a config's or a baseline's argument (a strategy, or a registered name) into a
strategy, ``lookup`` a name into the class (an unknown one gets an error that lists the
registered names) and ``from_spec`` rebuilds a strategy from its ``spec()``, for registered kinds
only (nothing else is ever constructed from a checkpoint). ``StrategyLike`` is what every
family's protocol extends; ``Strategy`` an optional base that gives its defaults.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, TypeVar

from botorch_dp.privacy.checks import did_you_mean

__all__ = [
    "CONFIG_FIELDS",
    "Strategy",
    "StrategyLike",
    "build",
    "from_spec",
    "is_strategy",
    "lookup",
    "lookup_family",
    "missing_members",
    "parameters",
    "register",
    "registered",
    "resolve",
]

_REGISTRY: dict[str, dict[str, type]] = {}
#: The ``DPGIBOConfig`` field each family is set by (how error messages name a strategy).
CONFIG_FIELDS = {
    "clip": "clip_bound",
    "noise": "noise_schedule",
    "projection": "subspace",
    "step_rule": "step_rule",
    "selection": "selection",
    "batches": "batch rule",
    "fitting": "fitting",
}


class StrategyLike(Protocol):
    r"""What ``Options`` reads of every strategy (``Strategy`` implements it): its family and name, the
    capabilities it ``requires`` and ``provides``, why it ``needs_finite_mu`` (if it does), its ``key``
    (what another's ``conflicts`` names it by), its ``label`` in errors, and an exact ``spec()``."""

    @property
    def family(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def requires(self) -> frozenset[str]: ...

    @property
    def provides(self) -> frozenset[str]: ...

    @property
    def needs_finite_mu(self) -> str | None: ...

    @property
    def key(self) -> str: ...

    @property
    def label(self) -> str: ...

    def conflicts(self) -> dict[str, str]: ...

    def spec(self) -> dict[str, Any]: ...


class Strategy:
    r"""An optional base that implements ``StrategyLike`` with defaults (a class lists what its
    instances may provide in ``can_provide``)."""

    family: ClassVar[str] = ""
    name: ClassVar[str] = ""
    requires: ClassVar[frozenset[str]] = frozenset()
    can_provide: ClassVar[frozenset[str]] = frozenset()
    needs_finite_mu: ClassVar[str | None] = None
    #: What a config must be given to build this strategy, where its registered name alone would
    #: leave a privacy or sensitivity choice to a class default (e.g. ``"its epsilon and loss_clip"``):
    #: the name is then refused (``build``) and the object must be given.
    by_name_needs: ClassVar[str | None] = None
    #: Keys of ``spec()`` a resumed run's config need not match exactly: ``"any"`` (a public
    #: computation's setting, e.g. the batch search's speed) or ``"presence"`` (only whether a value
    #: is given is compared, e.g. a callable's).
    resume_tolerates: ClassVar[Mapping[str, str]] = MappingProxyType({})

    @property
    def provides(self) -> frozenset[str]:
        r"""Capabilities this strategy gives the others (e.g. ``"noisy_norms"``)."""
        return self.can_provide

    @property
    def key(self) -> str:
        r"""``"family:name"``, what another strategy's ``conflicts`` names it by."""
        return f"{self.family}:{self.name}"

    @property
    def label(self) -> str:
        r"""How an error message names this strategy (the config's spelling)."""
        return f"{CONFIG_FIELDS.get(self.family, self.family)}={self.name!r}"

    def conflicts(self) -> dict[str, str]:
        r"""The ``key``s of strategies this one cannot run with, each with the reason."""
        return {}

    def spec(self) -> dict[str, Any]:
        r"""An exact, JSON-able description ``{"kind": name, ...parameters}`` (a dataclass's init fields)."""
        params: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(self) if dataclasses.is_dataclass(self) else ()
        return {"kind": self.name, **{f.name: getattr(self, f.name) for f in params if f.init}}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Strategy:
        r"""The strategy ``spec()`` describes."""
        return cls(**{k: v for k, v in spec.items() if k != "kind"})


_C = TypeVar("_C", bound=type)


def missing_members(strategy: Any, protocol: type) -> tuple[str, ...]:
    r"""The public members of ``protocol`` (and the protocols it extends) that ``strategy`` (a class,
    or an instance) lacks, sorted: a member counts when the class defines or declares it (an
    annotated field too) or the instance holds it. Signatures are mypy's to check."""
    cls = strategy if isinstance(strategy, type) else type(strategy)
    missing = _missing_in_class(cls, protocol)
    own = {} if strategy is cls else getattr(strategy, "__dict__", {})
    return tuple(name for name in missing if name not in own)


@functools.cache
def _missing_in_class(cls: type, protocol: type) -> tuple[str, ...]:
    members = {
        name
        for base in protocol.__mro__
        if Protocol in base.__bases__
        for name in (*vars(base), *getattr(base, "__annotations__", {}))
        if not name.startswith("_")
    }
    declared = [(vars(k), getattr(k, "__annotations__", {})) for k in cls.__mro__]
    return tuple(sorted(name for name in members if not any(name in d or name in a for d, a in declared)))


def register(family: str, name: str) -> Callable[[_C], _C]:
    r"""Class decorator: register a strategy class under ``family`` and ``name`` (it gets them as
    its ``family`` and ``name``); a name already taken in the family is refused."""

    def decorate(cls: _C) -> _C:
        table = _REGISTRY.setdefault(family, {})
        if name in table:
            raise ValueError(f"A {family} strategy named {name!r} is already registered ({table[name].__name__}).")
        named: Any = cls  # any class may register; it gets the family's and its own name
        named.family, named.name = family, name
        table[name] = cls
        return cls

    return decorate


def registered(family: str) -> dict[str, type]:
    r"""The registered classes of ``family``, by name."""
    return dict(_REGISTRY.get(family, {}))


def lookup(family: str, name: Any, what: str | None = None) -> type:
    r"""The class registered as ``name`` in ``family``; ``ValueError`` naming the registered ones."""
    table = _REGISTRY.get(family, {})
    if not isinstance(name, str) or name not in table:
        raise ValueError(
            f"{what or family} must be one of {sorted(table)} (or a strategy object), got {name!r}."
            + did_you_mean(name, table)
        )
    return table[name]


def is_strategy(value: Any) -> bool:
    r"""Whether ``value`` is a strategy object (a registered family's, or a user's ``StrategyLike``)."""
    return isinstance(getattr(value, "family", None), str) and callable(getattr(value, "spec", None))


def parameters(cls: type) -> set[str]:
    r"""The parameters (dataclass fields) of a strategy class."""
    return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


def resolve(
    family: str,
    value: Any,
    what: str | None = None,
    keywords: Mapping[str, tuple[str, Any]] | None = None,
    strict: bool = False,
) -> Any:
    r"""The strategy of ``family`` that the argument ``what`` (default: the family) gives: a strategy
    object of the family as it is, a registered name as ``build`` builds it; anything else is a
    ``ValueError`` naming ``what``."""
    what = what or family
    if isinstance(value, str):
        return build(family, value, what, keywords, strict)
    if (given := getattr(value, "family", None)) != family:
        raise ValueError(
            f"{what} must be a {family} strategy (optim.options: {sorted(registered(family))}) or its registered "
            f"name, got {value!r}" + ("." if given is None else f" (a {given} strategy).")
        )
    return value


def build(
    family: str,
    name: Any,
    what: str | None = None,
    keywords: Mapping[str, tuple[str, Any]] | None = None,
    strict: bool = False,
) -> Any:
    r"""The class registered as ``name`` in ``family``, built from those ``keywords``
    (``{parameter: (keyword, value)}``) that are its parameters. Without ``keywords`` the name alone
    must do: a class that declares ``by_name_needs``, or has a parameter without a default, is
    refused. ``strict``: each of the class's parameters among ``keywords`` must be given, and a
    keyword given to a class without that parameter is refused (naming the names that take it)."""
    what = what or family
    cls: Any = lookup(family, name, what)
    if keywords is None:
        if (needs := getattr(cls, "by_name_needs", None)) is not None:
            raise ValueError(
                f"{what}={name!r} needs {needs}, which the name alone does not give: pass the strategy, "
                f"{what}={cls.__name__}(...)."
            )
        try:
            return cls()
        except TypeError as err:  # a parameter without a default, e.g. Projected's oracle
            raise ValueError(
                f"{what}={name!r} cannot be built from its name alone ({err}); pass the strategy."
            ) from None
    taken = parameters(cls)
    for key, (keyword, given) in keywords.items() if strict else ():
        if key in taken and given is None:
            raise ValueError(f"{what}={name!r} needs {keyword}.")
        if key not in taken and given is not None:
            users = tuple(other for other, c in registered(family).items() if key in parameters(c))
            raise ValueError(f"{keyword} is only used by {what} in {users}, not by {what}={name!r}.")
    return cls(**{key: given for key, (_, given) in keywords.items() if key in taken})


def lookup_family(family: str, name: Any, protocol: type, what: str | None = None) -> type[Any]:
    r"""``lookup``, and the class must implement the family's ``protocol`` (``TypeError`` naming the
    members it lacks if not); a plain class as ``protocol``: the class must derive from it."""
    cls = lookup(family, name, what)
    what_cls = f"The {family} strategy {name!r} ({cls.__name__})"
    if Protocol not in protocol.__bases__:
        if not issubclass(cls, protocol):
            raise TypeError(f"{what_cls} does not derive from {protocol.__name__}.")
    elif missing := missing_members(cls, protocol):
        raise TypeError(f"{what_cls} does not implement {protocol.__name__}: it lacks {', '.join(missing)}.")
    return cls


def from_spec(family: str, spec: Any) -> Any:
    r"""Rebuild a strategy from ``spec()`` (registered kinds only: the class's ``from_spec``)."""
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise ValueError(f"A {family} spec must be a mapping with a 'kind', got {spec!r}.")
    cls: Any = lookup(family, spec["kind"])
    return cls.from_spec(spec)
