r"""The tests mirror the package (issue 42, item 6): every module ``botorch_dp/a/b.py`` has its test
module ``tests/a/test_b.py`` (``botorch_dp/x.py`` has ``tests/test_x.py``); ``__init__.py`` and
``__main__.py`` are not counted. The modules still without one are listed in
``MISSING_TEST_MODULES``, which may only shrink: a module that gains its test module, moves or is
removed must leave the list, and no new module may join it.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "botorch_dp"
TESTS = ROOT / "tests"
NOT_COUNTED = frozenset({"__init__.py", "__main__.py"})

#: Package modules (dotted, relative to ``botorch_dp``) with no test module of the same path yet.
#: The list only shrinks.
MISSING_TEST_MODULES: frozenset[str] = frozenset()


def package_modules(package: Path = PACKAGE) -> set[str]:
    r"""Every counted module of ``package``, dotted and relative to it (``privacy.ledger.state``)."""
    return {
        ".".join(path.relative_to(package).with_suffix("").parts)
        for path in package.rglob("*.py")
        if path.name not in NOT_COUNTED
    }


def mirror_path(module: str, tests: Path = TESTS) -> Path:
    r"""Where the test module of ``module`` lives: ``a.b`` → ``tests/a/test_b.py``."""
    *folders, name = module.split(".")
    return tests.joinpath(*folders, f"test_{name}.py")


def modules_without_tests(package: Path = PACKAGE, tests: Path = TESTS) -> set[str]:
    r"""The counted modules of ``package`` with no test module of the same path under ``tests``."""
    return {module for module in package_modules(package) if not mirror_path(module, tests).is_file()}


def test_no_new_module_lacks_its_test_module():
    new = modules_without_tests() - MISSING_TEST_MODULES
    assert not new, f"modules with no test module of the same path: {sorted(new)}"


def test_the_list_of_missing_test_modules_only_shrinks():
    modules = package_modules()
    gone = MISSING_TEST_MODULES - modules
    assert not gone, f"no longer package modules; remove them from MISSING_TEST_MODULES: {sorted(gone)}"
    tested = {module for module in MISSING_TEST_MODULES if mirror_path(module).is_file()}
    assert not tested, f"these now have their test module; remove them from MISSING_TEST_MODULES: {sorted(tested)}"


def test_the_walk_maps_paths_both_ways(tmp_path):
    package, tests = tmp_path / "pkg", tmp_path / "tests"
    for path in ("__init__.py", "__main__.py", "x.py", "a/__init__.py", "a/b.py", "a/c.py"):
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text("")
    for path in ("test_x.py", "a/test_b.py", "test_c.py"):  # test_c.py is not a's mirror
        (tests / path).parent.mkdir(parents=True, exist_ok=True)
        (tests / path).write_text("")
    assert package_modules(package) == {"x", "a.b", "a.c"}
    assert modules_without_tests(package, tests) == {"a.c"}
