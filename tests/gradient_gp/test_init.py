"""Tests for gradient_gp/__init__.py: the package re-exports every public name of core.py,
models.py (the import path from before the split) and closed_form.py, and none of them imports
the package back at import time."""

import ast
from pathlib import Path

import botorch_dp.gradient_gp as package
from botorch_dp.gradient_gp import closed_form, core, exact, models


def test_every_public_name_is_re_exported():
    assert set(package.__all__) == set(core.__all__) | set(models.__all__) | set(closed_form.__all__)
    for module in (core, models, closed_form):
        for name in module.__all__:
            assert getattr(package, name) is getattr(module, name)


def test_the_modules_do_not_import_the_package_or_each_other_back():
    def imported(module):
        tree = ast.parse(Path(module.__file__).read_text("utf-8"))
        return {node.module for node in tree.body if isinstance(node, ast.ImportFrom)} | {
            alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
        }

    assert "botorch_dp.gradient_gp" not in imported(core) | imported(models) | imported(closed_form)
    assert "botorch_dp.gradient_gp.core" in imported(models)
    assert "botorch_dp.gradient_gp.models" not in imported(core)
    assert "botorch_dp.gradient_gp.exact" in imported(core) & imported(models)  # both build from its parts
    assert not {"botorch_dp.gradient_gp.core", "botorch_dp.gradient_gp.models"} & imported(exact)
