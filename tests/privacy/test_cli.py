r"""Tests for botorch_dp.privacy.cli."""

import json
import subprocess
import sys

import pytest

from botorch_dp.privacy.accountants import epsilon_table
from botorch_dp.privacy.cli import main


def _parse_table(text):
    lines = text.strip().splitlines()
    assert lines[1].split()[0] == "accountant"
    return {line.split()[0]: float(line.split()[-1]) for line in lines[2:]}


def test_mu_table(capsys):
    assert main(["--mu", "1", "--delta", "1e-5"]) == 0
    values = _parse_table(capsys.readouterr().out)
    assert list(values) == ["gdp_exact", "opacus_rdp", "opacus_prv", "zcdp_bun_steinke", "zcdp_cks"]
    assert values["gdp_exact"] == pytest.approx(4.3772, abs=1e-4)
    assert values["opacus_rdp"] == pytest.approx(4.729, abs=1e-3)
    assert values["zcdp_bun_steinke"] == pytest.approx(5.2985, abs=1e-4)
    expected = epsilon_table(mu=1.0, delta=1e-5)
    for key, value in values.items():
        assert value == pytest.approx(expected[key], abs=1e-4)


def test_noise_multiplier_table_and_alignment(capsys):
    main(["--noise-multiplier", "5", "--steps", "25", "--delta", "1e-5"])
    out = capsys.readouterr().out
    values = _parse_table(out)
    assert values["gdp_exact"] == pytest.approx(4.3772, abs=1e-4)
    assert values["opacus_prv"] == pytest.approx(4.387, abs=1e-3)
    assert values["opacus_rdp"] == pytest.approx(4.729, abs=1e-3)
    assert "mu = 1 " in out
    # The epsilon column is right-aligned: every row has the same length.
    assert len({len(line) for line in out.strip().splitlines()[1:]}) == 1


def test_json_output(capsys):
    main(["--mu", "0.5", "--delta", "1e-5", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["mu"] == 0.5 and payload["steps"] == 1
    assert payload["epsilon"]["gdp_exact"] == pytest.approx(1.9931, abs=1e-3)


@pytest.mark.parametrize(
    "argv",
    [
        ["--noise-multiplier", "5"],
        ["--mu", "1", "--noise-multiplier", "5", "--steps", "2"],
        [],
        ["--mu", "1", "--delta", "2"],
        ["--mu", "-1"],
    ],
)
def test_bad_arguments_exit_with_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_runs_as_module():
    completed = subprocess.run(
        [sys.executable, "-m", "botorch_dp.privacy.cli", "--mu", "2", "--delta", "1e-5"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    assert _parse_table(completed.stdout)["gdp_exact"] == pytest.approx(9.9973, abs=1e-3)
