r"""The Makefile installs only when the environment is out of date (issue 16 item 6), and
``make demo`` only what the demo needs (issue 43 item 7).

``make -n`` (dry run) in a copy of the Makefile and the package metadata, with a fake
virtual environment, shows what each target would run: everything on a fresh checkout
(venv, the pinned torch first, then the package: ``pip install -e .`` for the demo,
``pip install -e '.[dev]'`` for the tests, lint and docs), only the command itself once the
stamps are newer than ``setup.cfg``, ``pyproject.toml`` and the Makefile, and the installs
again when one of them changes. A real ``make`` with a fake ``pip`` and ``python`` runs the
targets one after the other, in both orders, and logs what each installs. Nothing is
installed or run.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = "pip install torch==2.13.0"
PACKAGE = "pip install -e '.[dev]'"
RUNTIME = "pip install -e ."


def _dry_run(cwd: Path, target: str) -> list[str]:
    # make's own messages in English; without the variables of an enclosing make (CI runs
    # the suite through `make test`, whose MAKELEVEL/MAKEFLAGS make `make -n` print
    # "Entering directory" lines)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")}
    env["LC_ALL"] = "C"
    env.pop("MAKEFLAGS", None)
    done = subprocess.run(
        ["make", "-n", target], cwd=cwd, capture_output=True, text=True, check=True, timeout=60, env=env
    )
    return done.stdout.splitlines()


@pytest.fixture
def checkout(tmp_path):
    for name in ("Makefile", "setup.cfg", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
        os.utime(tmp_path / name, (1_000_000, 1_000_000))
    return tmp_path


def _fake_venv(
    checkout: Path, stamp_time: float | None, stamps: tuple[str, ...] = (".installed", ".installed-dev")
) -> None:
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "python").touch()
    if stamp_time is not None:
        for stamp in stamps:
            (checkout / ".venv" / stamp).touch()
            os.utime(checkout / ".venv" / stamp, (stamp_time, stamp_time))


@pytest.mark.parametrize(
    "target,command",
    [
        ("test", "python -m pytest -q"),
        ("test-fast", 'python -m pytest -q -m "not slow"'),
        ("lint", "python -m ruff check ."),
        ("docs", "python -m mkdocs build --strict"),
    ],
)
def test_fresh_checkout_installs_the_dev_extras_then_runs(checkout, target, command):
    lines = _dry_run(checkout, target)
    assert lines[0].endswith("-m venv .venv")
    pin = next(i for i, line in enumerate(lines) if line.endswith(PIN))
    package = next(i for i, line in enumerate(lines) if line.endswith(PACKAGE))
    assert pin < package < len(lines) - 1  # the pinned CPU torch before the package, then the command
    touch = lines.index("touch .venv/.installed .venv/.installed-dev")
    assert lines[touch + 1] == f".venv/bin/{command}"


def test_fresh_checkout_demo_installs_the_runtime_only(checkout):
    lines = _dry_run(checkout, "demo")
    assert lines[0].endswith("-m venv .venv")
    assert [line.split("/")[-1] for line in lines[2:4]] == [PIN, RUNTIME]  # after venv and pip's upgrade
    assert lines[-2:] == ["touch .venv/.installed", ".venv/bin/python -m botorch_dp.demo"]
    assert not any("[dev]" in line or "ensure_postgres" in line for line in lines), lines


@pytest.mark.parametrize("target", ["demo", "test", "test-fast", "docs", "install", "bench"])
def test_up_to_date_environment_installs_nothing(checkout, target):
    _fake_venv(checkout, stamp_time=2_000_000)
    lines = _dry_run(checkout, target)
    assert not any("pip install" in line or "-m venv" in line for line in lines), lines
    if target == "install":
        assert lines == ["make: Nothing to be done for 'install'."]
    else:
        assert len(lines) == 1 and lines[0].startswith(".venv/bin/python ")


@pytest.mark.parametrize("changed", ["setup.cfg", "pyproject.toml", "Makefile"])
def test_changed_metadata_reinstalls_into_the_existing_venv(checkout, changed):
    _fake_venv(checkout, stamp_time=2_000_000)
    os.utime(checkout / changed, (3_000_000, 3_000_000))
    lines = _dry_run(checkout, "demo")
    assert not any("-m venv" in line for line in lines)
    assert [line.split("/")[-1] for line in lines[:2]] == [PIN, RUNTIME]
    assert lines[-1] == ".venv/bin/python -m botorch_dp.demo"
    lines = _dry_run(checkout, "test")
    assert [line.split("/")[-1] for line in lines[:2]] == [PIN, PACKAGE.split("/")[-1]]
    assert lines[-1] == ".venv/bin/python -m pytest -q"


def test_a_demo_environment_gets_the_dev_extras_for_the_tests_and_not_the_other_way_round(checkout):
    _fake_venv(checkout, stamp_time=2_000_000, stamps=(".installed",))  # after `make demo`
    assert _dry_run(checkout, "demo") == [".venv/bin/python -m botorch_dp.demo"]
    lines = _dry_run(checkout, "test")
    assert not any("-m venv" in line for line in lines)
    assert any(line.endswith(PACKAGE) for line in lines) and lines[-1] == ".venv/bin/python -m pytest -q"


def test_missing_stamp_reinstalls_and_ci_starts_from_a_fresh_venv(checkout):
    _fake_venv(checkout, stamp_time=None)  # a venv made before the stamp existed, or a failed install
    assert any(line.endswith(PACKAGE) for line in _dry_run(checkout, "test"))
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("rm -rf .venv") < ci.index("make test")  # so CI always takes the fresh path


def _make_for_real(checkout: Path, *targets: str) -> list[str]:
    r"""Run ``make TARGET`` for each target in turn with a fake venv whose ``pip`` and ``python``
    (and ``scripts/ensure_postgres.sh``) only log their arguments; the log, one line a call."""
    log = checkout / "calls.log"
    bin_dir = checkout / ".venv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("pip", "python"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n')
        (bin_dir / name).chmod(0o755)
    (checkout / "scripts").mkdir(exist_ok=True)
    (checkout / "scripts" / "ensure_postgres.sh").write_text(f'echo "ensure_postgres" >> {log}\n')
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")}
    calls = []
    for target in targets:
        log.write_text("")
        subprocess.run(["make", "-s", target], cwd=checkout, check=True, timeout=60, env=env, capture_output=True)
        calls.append(" | ".join(log.read_text().splitlines()))
    return calls


def test_demo_and_test_in_either_order_install_what_each_needs_once(checkout):
    dev = "pip install torch==2.13.0 | pip install -e .[dev] | ensure_postgres"  # the shell took the quotes
    runtime = f"pip install torch==2.13.0 | {RUNTIME}"
    demo, tests = "python -m botorch_dp.demo", "python -m pytest -q"
    assert _make_for_real(checkout, "demo", "demo", "test", "test", "demo") == [
        f"{runtime} | {demo}",
        demo,
        f"{dev} | {tests}",  # the demo's .venv gets the dev extras
        tests,
        demo,
    ]
    os.remove(checkout / ".venv" / ".installed")
    os.remove(checkout / ".venv" / ".installed-dev")
    assert _make_for_real(checkout, "test", "demo", "lint") == [
        f"{dev} | {tests}",
        demo,  # the dev set-up installed the runtime too
        "python -m ruff check . | python -m ruff format --check . "
        "| python -m ruff format --check --line-length 88 README.md tutorials/README.md | python -m mypy",
    ]


@pytest.mark.parametrize(("test_rc", "lint_rc", "expected"), [(0, 0, 0), (3, 0, 3), (0, 5, 5), (3, 5, 3)])
def test_ci_runs_the_tests_then_lint_from_a_fresh_venv_and_fails_with_the_first_failure(
    tmp_path, test_rc, lint_rc, expected
):
    # .ci/run with a `make` on PATH that logs its target and exits with the code given for it
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / ".venv").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "make"
    fake.write_text(
        f'#!/usr/bin/env bash\necho "$1 $([ -d .venv ] && echo venv || echo fresh)" >> make.log\n'
        f'[ "$1" = test ] && exit {test_rc}\n[ "$1" = lint ] && exit {lint_rc}\nexit 0\n'
    )
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], env=env, cwd=tmp_path, check=False)
    assert done.returncode == expected
    assert (tmp_path / "make.log").read_text().split("\n")[:2] == ["test fresh", "lint fresh"]
