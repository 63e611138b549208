r"""Old names that keep working, with a ``DeprecationWarning`` that names the new one.

One name per concept: the validation budget is ``validation_mu_budget`` (the ledger's name
too, was ``privacy_budget_mu``), ``selection`` means only the choice of the returned iterate
(the batch search is ``batch_search``, was ``batch_selection``), and every share of ``μ`` is
read off one ``BudgetSplit`` (``config.mu_split.steps_mu``, was ``steps_privacy_mu``).
``rename_fields`` lets a dataclass accept and read a renamed field by its old name;
``alias_property`` keeps an old read-only property.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

from botorch_dp.utils import warn_renamed

__all__ = ["alias_property", "rename_fields", "warn_renamed"]


def rename_fields(cls: type[Any], renamed: dict[str, str]) -> None:
    r"""Let ``cls(old=...)`` set the field ``renamed[old]`` and ``obj.old`` read it, each with a
    warning. Giving both names with different values is a ``ValueError`` naming both (this also
    covers ``dataclasses.replace(obj, old=...)``: use the new name there)."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        for old, new in renamed.items():
            if old not in kwargs:
                continue
            value = kwargs.pop(old)
            warn_renamed(f"{cls.__name__}({old}=...)", f"{new}=...")
            if new in kwargs and kwargs[new] is not None and kwargs[new] != value:
                raise ValueError(
                    f"{old} (deprecated) = {value!r} and {new} = {kwargs[new]!r} disagree; give {new} only."
                )
            kwargs[new] = value
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    for old, new in renamed.items():
        setattr(cls, old, alias_property(f"{cls.__name__}.{old}", f"{cls.__name__}.{new}", operator.attrgetter(new)))


def alias_property(old: str, new: str, read: Callable[[Any], Any]) -> property:
    r"""A read-only property that warns that ``old`` is ``new`` now, then returns ``read(self)``."""

    def getter(self: Any) -> Any:
        warn_renamed(old, new)
        return read(self)

    return property(getter, doc=f"Deprecated: {new}.")
