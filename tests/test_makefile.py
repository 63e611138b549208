r"""The Makefile installs only when the environment is out of date (issue 16 item 6).

``make -n`` (dry run) in a copy of the Makefile and the package metadata, with a fake
virtual environment, shows what each target would run: everything on a fresh checkout
(venv, the pinned torch first, then the package), only the command itself once the stamp
is newer than ``setup.cfg``, ``pyproject.toml`` and the Makefile, and the installs again
when one of them changes. Nothing is installed or run.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = "pip install torch==2.13.0"
PACKAGE = "pip install -e '.[dev]'"


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


def _fake_venv(checkout: Path, stamp_time: float | None) -> None:
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "python").touch()
    if stamp_time is not None:
        (checkout / ".venv" / ".installed").touch()
        os.utime(checkout / ".venv" / ".installed", (stamp_time, stamp_time))


@pytest.mark.parametrize(
    "target,command",
    [
        ("demo", "python -m botorch_dp.demo"),
        ("test", "python -m pytest -q"),
        ("test-fast", 'python -m pytest -q -m "not slow"'),
    ],
)
def test_fresh_checkout_installs_everything_then_runs(checkout, target, command):
    lines = _dry_run(checkout, target)
    assert lines[0].endswith("-m venv .venv")
    pin = next(i for i, line in enumerate(lines) if line.endswith(PIN))
    package = next(i for i, line in enumerate(lines) if line.endswith(PACKAGE))
    assert pin < package < len(lines) - 1  # the pinned CPU torch before the package, then the command
    assert lines[-2] == "touch .venv/.installed" and lines[-1] == f".venv/bin/{command}"


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
    assert [line.split("/")[-1] for line in lines[:2]] == ["pip install torch==2.13.0", PACKAGE.split("/")[-1]]
    assert lines[-1] == ".venv/bin/python -m botorch_dp.demo"


def test_missing_stamp_reinstalls_and_ci_starts_from_a_fresh_venv(checkout):
    _fake_venv(checkout, stamp_time=None)  # a venv made before the stamp existed, or a failed install
    assert any(line.endswith(PACKAGE) for line in _dry_run(checkout, "test"))
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("rm -rf .venv") < ci.index("make test")  # so CI always takes the fresh path


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
