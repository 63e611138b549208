r"""No module of the package or of the benchmark harness reads another object's private attributes
(issue 42, item 5).

A private attribute is one whose name starts with ``_`` and is not a dunder. A module may use the
private attributes it owns: those of ``self`` and ``cls``, those reached through ``super()``, and
any name the module itself defines (a module-level name, a function or class it defines, a name in
the body of one of its classes, an attribute it sets on ``self`` or ``cls``), so that the instances
of one module's class may read each other's state. Anything else (``opt._noise_gen`` of another
module's run, ``ckpt._check_keys`` of another module, ``sys._getframe``) is a private read across a
module boundary: the owner gives a public name, a narrow property, or the caller takes an explicit
argument. A ``Protocol`` that declares another class's private attributes does not make them the
declaring module's own. A name a module imports is not its own.

Private names reached through an import (``from m import _x``, ``import m`` then ``m._x``,
``from pkg import _mod``, ``import pkg._mod``) follow one rule: **a leading-underscore name may be
imported only inside the package that defines a private module** (a module whose own name starts
with ``_``). A private module is private to its package: the modules of that package (its
``__init__`` and its subpackages included) may import it and any name in it, private or not; no
module outside the package may import anything from it. A public module's private names are private
to that module alone, so ``from botorch_dp.methods.proxy import _proxy_losses`` is a private read
even from ``botorch_dp.methods``. Formally, for the dotted path of what is imported or read
(``m._x`` for ``from m import _x``): its first private part must name a module of the repository,
and the importer must lie inside the package that holds that module. There is no exception list.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "botorch_dp"
HARNESS = ROOT / "benchmarks"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_protocol(cls: ast.ClassDef) -> bool:
    return any((b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)) == "Protocol" for b in cls.bases)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    return []


def module_name(path: Path) -> str:
    r"""The dotted name of a file of the repository (``botorch_dp/a/__init__.py`` is ``botorch_dp.a``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def own_names(tree: ast.Module) -> set[str]:
    r"""The names a module defines itself (see the module docstring); the names it imports are not its own."""
    names: set[str] = set()
    for statement in tree.body:  # module-level names
        for target in _targets(statement):
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef) and not _is_protocol(node):
            for item in node.body:
                names.update(t.id for t in _targets(item) if isinstance(t, ast.Name))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
    return names


def _source_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    r"""The absolute name of the module a ``from ... import`` reads (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def crosses(path: str, importer: str, modules: Collection[str]) -> bool:
    r"""Whether ``importer`` reaching the dotted ``path`` breaks the rule of the module docstring:
    ``path`` has a private part, and its first private part names no module of ``modules`` or
    ``importer`` lies outside the package that holds that module."""
    parts = path.split(".")
    for k, part in enumerate(parts):
        if _is_private(part):
            package = ".".join(parts[:k])
            inside = bool(package) and (importer == package or importer.startswith(package + "."))
            return not (inside and ".".join(parts[: k + 1]) in modules)
    return False


def _chain(node: ast.Attribute) -> tuple[str, list[str]] | None:
    r"""``("h", ["a", "b", "_c"])`` for ``h.a.b._c``; ``None`` when the chain does not start at a name."""
    attrs = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        attrs.append(value.attr)
        value = value.value
    return (value.id, attrs[::-1]) if isinstance(value, ast.Name) else None


def private_reads(source: str, module: str = "m", modules: Collection[str] = (), is_package: bool = False) -> list[str]:
    r"""``"line N: ..."`` for each private name the module imports or reads but does not own.

    Args:
        source: The module's text.
        module: Its dotted name (the importer of the module docstring's rule).
        modules: The dotted names of the repository's modules (which names are modules).
        is_package: Whether the module is a package's ``__init__`` (for relative imports).
    """
    tree = ast.parse(source)
    own = own_names(tree)
    imported: dict[str, str] = {}  # local name -> the dotted path it was imported as
    found: list[tuple[int, int, str]] = []  # (line, column, text), reported in source order
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]  # ``import a.b`` binds ``a``; ``import a.b as h`` binds ``a.b``
                imported[alias.asname or top] = alias.name if alias.asname else top
                if crosses(alias.name, module, modules):
                    found.append((alias.lineno, alias.col_offset, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            source_module = _source_module(node, module, is_package)
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{source_module}.{alias.name}"
                if alias.name != "*" and crosses(f"{source_module}.{alias.name}", module, modules):
                    found.append((alias.lineno, alias.col_offset, f"from {source_module} import {alias.name}"))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        chain = _chain(node)
        if chain is not None and chain[0] in imported:  # an attribute of something imported: the import rule
            if crosses(".".join([imported[chain[0]], *chain[1]]), module, modules):
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
            continue
        if node.attr in own:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            continue
        found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [f"line {line}: {text}" for line, _, text in sorted(found)]


def test_the_finder_sees_reads_writes_calls_and_protocol_declarations_but_not_a_modules_own():
    source = """
import sys
from typing import Protocol
from other import helpers as h

_CACHE = {}


class Run(Protocol):
    _noise_gen: object  # declaring another class's private state does not make it this module's


class Box:
    _slots = 1

    def __init__(self):
        self._value = 0

    def merge(self, other: "Box"):
        return self._value + other._value + Box._slots + super()._base() + self.__class__.__name__.__len__()


def _helper():
    return _CACHE


def use(opt, ckpt):
    opt._noise_gen.set_state(None)
    opt._committed = None
    ckpt._check_keys({}, set(), "x")
    return sys._getframe(), h._helper(), _helper()
"""
    assert private_reads(source) == [
        "line 28: opt._noise_gen",
        "line 29: opt._committed",
        "line 30: ckpt._check_keys",
        "line 31: sys._getframe",
        "line 31: h._helper",
    ]  # h._helper: the module defines a _helper of its own, but h is imported, so the import rule decides


PACKAGE_MODULES = {
    "pkg",
    "pkg.a",
    "pkg.b",
    "pkg.mech",
    "pkg.mech._noise",
    "pkg.mech.sums",
    "pkg.mech.sub",
    "pkg.mech.sub.deep",
    "pkg.other",
}


def test_the_finder_sees_private_names_imported_across_modules_in_every_form():
    source = """
import pkg.a
import pkg.mech._noise
import pkg.a as alias
from pkg.a import _proxy_losses, public_name
from pkg.a import _fit as fit
from pkg import _missing
from pkg.mech import _noise
from pkg.mech._noise import draw, _draw
from . import _sibling
from .a import _x


def use():
    from pkg.b import _lazy  # a lazy import counts too
    return alias._table, pkg.a._helper, _noise.draw, _noise._scale, public_name._attr


_proxy_losses = None  # defining the name again does not make the imported one this module's
"""
    assert private_reads(source, module="pkg.other", modules=PACKAGE_MODULES) == [
        "line 3: import pkg.mech._noise",
        "line 5: from pkg.a import _proxy_losses",
        "line 6: from pkg.a import _fit",
        "line 7: from pkg import _missing",
        "line 8: from pkg.mech import _noise",
        "line 9: from pkg.mech._noise import draw",
        "line 9: from pkg.mech._noise import _draw",
        "line 10: from pkg import _sibling",
        "line 11: from pkg.a import _x",
        "line 15: from pkg.b import _lazy",
        "line 16: alias._table",
        "line 16: pkg.a._helper",
        "line 16: _noise._scale",
        "line 16: public_name._attr",
    ]


def test_a_private_module_is_open_to_its_package_and_its_subpackages_only():
    source = """
import pkg.mech._noise
from pkg.mech import _noise
from pkg.mech._noise import draw, _draw
from pkg.a import _proxy_losses


def use():
    return _noise._scale, pkg.mech._noise._scale
"""
    inside = ["line 5: from pkg.a import _proxy_losses"]  # a public module's private name is its own
    assert private_reads(source, module="pkg.mech.sums", modules=PACKAGE_MODULES) == inside
    assert private_reads(source, module="pkg.mech.sub.deep", modules=PACKAGE_MODULES) == inside
    assert private_reads(source, module="pkg.mech", modules=PACKAGE_MODULES, is_package=True) == inside
    relative = "from ._noise import _draw\nfrom .. import _noise\n"
    assert private_reads(relative, module="pkg.mech", modules=PACKAGE_MODULES, is_package=True) == [
        "line 2: from pkg import _noise"  # pkg._noise is no module: the package's __init__ owns its private names
    ]
    assert private_reads(relative, module="pkg.mech.sub.deep", modules=PACKAGE_MODULES) == [
        "line 1: from pkg.mech.sub._noise import _draw",  # no such module: nothing private is open
    ]
    assert private_reads(source, module="pkg.b", modules=PACKAGE_MODULES) == [
        "line 2: import pkg.mech._noise",
        "line 3: from pkg.mech import _noise",
        "line 4: from pkg.mech._noise import draw",
        "line 4: from pkg.mech._noise import _draw",
        "line 5: from pkg.a import _proxy_losses",
        "line 9: _noise._scale",
        "line 9: pkg.mech._noise",  # each private part of a chain is a read of its own
        "line 9: pkg.mech._noise._scale",
    ]


def test_no_module_of_the_package_or_the_harness_reads_another_objects_private_attributes():
    paths = sorted(PACKAGE.rglob("*.py")) + sorted(HARNESS.rglob("*.py"))
    assert any(p.is_relative_to(HARNESS) for p in paths) and any(p.is_relative_to(PACKAGE) for p in paths)
    modules = {module_name(p) for p in paths}
    assert {"botorch_dp.privacy.mechanisms._noise", "botorch_dp", "benchmarks.cli"} <= modules
    found = {
        path.relative_to(ROOT).as_posix(): reads
        for path in paths
        if (
            reads := private_reads(
                path.read_text("utf-8"), module_name(path), modules, is_package=path.name == "__init__.py"
            )
        )
    }
    assert found == {}, "\n".join(f"{path}: {', '.join(reads)}" for path, reads in found.items())
