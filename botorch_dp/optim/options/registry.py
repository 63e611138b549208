r"""The strategies' registry: today's option strings and a checkpoint's specs resolve here.

A strategy class registers under its family and name with ``@register("noise", "adaptive_norm")``;
``lookup`` turns a name into the class (an unknown one gets an error that lists the
registered names) and ``from_spec`` rebuilds a strategy from its ``spec()``, for registered
kinds only (an allow-list: nothing else is ever constructed from a checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from botorch_dp.privacy.checks import did_you_mean

__all__ = ["CONFIG_FIELDS", "Strategy", "from_spec", "lookup", "lookup_family", "register", "registered"]

_REGISTRY: dict[str, dict[str, type[Strategy]]] = {}
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


class Strategy:
    r"""What every option strategy has: its family and registered name, the capabilities it
    needs from the other strategies (``requires``) and gives them (``provides``; a class lists
    what its instances may give in ``can_provide``), the strategies it cannot run with and why
    (``conflicts``), why it needs a finite ``privacy_mu`` if it does (``needs_finite_mu``), and an
    exact ``spec()``."""

    family: ClassVar[str] = ""
    name: ClassVar[str] = ""
    requires: ClassVar[frozenset[str]] = frozenset()
    can_provide: ClassVar[frozenset[str]] = frozenset()
    needs_finite_mu: ClassVar[str | None] = None

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
        r"""An exact, JSON-able description ``{"kind": name, ...parameters}``."""
        return {"kind": self.name}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Strategy:
        r"""The strategy ``spec()`` describes."""
        return cls(**{k: v for k, v in spec.items() if k != "kind"})


_C = TypeVar("_C", bound=type[Strategy])
_S = TypeVar("_S", bound=Strategy)


def register(family: str, name: str) -> Callable[[_C], _C]:
    r"""Class decorator: register a strategy class under ``family`` and ``name``."""

    def decorate(cls: _C) -> _C:
        table = _REGISTRY.setdefault(family, {})
        if name in table:
            raise ValueError(f"A {family} strategy named {name!r} is already registered ({table[name].__name__}).")
        cls.family, cls.name = family, name
        table[name] = cls
        return cls

    return decorate


def registered(family: str) -> dict[str, type[Strategy]]:
    r"""The registered classes of ``family``, by name."""
    return dict(_REGISTRY.get(family, {}))


def lookup(family: str, name: Any, what: str | None = None) -> type[Strategy]:
    r"""The class registered as ``name`` in ``family``; ``ValueError`` naming the registered ones."""
    table = _REGISTRY.get(family, {})
    if not isinstance(name, str) or name not in table:
        raise ValueError(
            f"{what or family} must be one of {sorted(table)} (or a strategy object), got {name!r}."
            + did_you_mean(name, table)
        )
    return table[name]


def lookup_family(family: str, name: Any, base: type[_S], what: str | None = None) -> type[_S]:
    r"""``lookup``, and the class must derive from the family's type ``base`` (``TypeError`` if not)."""
    cls = lookup(family, name, what)
    if not issubclass(cls, base):
        raise TypeError(f"The {family} strategy {name!r} ({cls.__name__}) does not derive from {base.__name__}.")
    return cls


def from_spec(family: str, spec: Any) -> Strategy:
    r"""Rebuild a strategy from ``spec()`` (registered kinds only)."""
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise ValueError(f"A {family} spec must be a mapping with a 'kind', got {spec!r}.")
    return lookup(family, spec["kind"]).from_spec(spec)
