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
declaring module's own. There is no exception list.
"""

from __future__ import annotations

import ast
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


def own_names(tree: ast.Module) -> set[str]:
    r"""The names a module defines itself (see the module docstring)."""
    names: set[str] = set()
    for statement in tree.body:  # module-level names
        for target in _targets(statement):
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in statement.names)
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


def private_reads(source: str) -> list[str]:
    r"""``"line N: expr"`` for each private attribute the module uses but does not own."""
    tree = ast.parse(source)
    own = own_names(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)) or node.attr in own:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda s: int(s.split(":")[0].split()[1]))


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
    ]  # h._helper: this module defines a function _helper, so the name is its own (the check is by name)


def test_no_module_of_the_package_or_the_harness_reads_another_objects_private_attributes():
    paths = sorted(PACKAGE.rglob("*.py")) + sorted(HARNESS.rglob("*.py"))
    assert any(p.is_relative_to(HARNESS) for p in paths) and any(p.is_relative_to(PACKAGE) for p in paths)
    found = {
        path.relative_to(ROOT).as_posix(): reads for path in paths if (reads := private_reads(path.read_text("utf-8")))
    }
    assert found == {}, "\n".join(f"{path}: {', '.join(reads)}" for path, reads in found.items())
