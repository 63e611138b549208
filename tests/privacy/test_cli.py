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
        ["--epsilon", "1"],  # a target needs its delta
        ["--epsilon", "1", "--mu", "1", "--delta", "1e-5"],
        ["--epsilon", "-1", "--delta", "1e-5"],
        ["--epsilon", "1", "--delta", "1e-5", "--users", "100"],  # n without B
        ["--epsilon", "1", "--delta", "1e-5", "--users", "0", "--clip-bound", "1"],
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
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert _parse_table(completed.stdout)["gdp_exact"] == pytest.approx(9.9973, abs=1e-3)


def _calibration(text):
    r"""The three calibration lines printed before the table with --epsilon."""
    head, table = text.split("\n\n", 1)
    numbers = {}
    for line in head.splitlines():
        for key, marker in (("mu", ")-DP  =>  mu = "), ("multiplier", "sqrt(T)/mu = "), ("std", "(n mu) = ")):
            if marker in line:
                numbers[key] = float(line.split(marker)[1].split()[0])
    return numbers, _parse_table(table)


def test_target_epsilon_gives_mu_noise_multiplier_and_noise_std(capsys):
    from botorch_dp.privacy.analysis.gdp import gdp_delta, gdp_mu

    assert main(["--epsilon", "1", "--delta", "1e-5", "--steps", "25", "--users", "1000", "--clip-bound", "2"]) == 0
    numbers, table = _calibration(capsys.readouterr().out)
    mu = gdp_mu(1.0, 1e-5)
    assert gdp_delta(mu, 1.0) == pytest.approx(1e-5, rel=1e-9)  # the exact inverse
    assert numbers["mu"] == pytest.approx(mu, rel=1e-5)
    assert numbers["multiplier"] == pytest.approx(5 / mu, rel=1e-5)  # sqrt(T)/mu
    assert numbers["std"] == pytest.approx(2 * 2.0 * 5 / (1000 * mu), rel=1e-5)  # 2B sqrt(T)/(n mu)
    assert table["gdp_exact"] == pytest.approx(1.0, abs=1e-4)  # and back: the target
    assert table["opacus_rdp"] > 1.0 and table["opacus_prv"] == pytest.approx(1.0, abs=0.02)
    # μ → ε (today's direction) and ε → μ agree: --mu with the printed μ gives the target ε
    main(["--mu", repr(mu), "--delta", "1e-5", "--json"])
    assert json.loads(capsys.readouterr().out)["epsilon"]["gdp_exact"] == pytest.approx(1.0, rel=1e-9)


def test_target_epsilon_json_and_the_mechanisms_noise(capsys):
    from botorch_dp.privacy.mechanisms import GaussianGradientMechanism

    main(["--epsilon", "0.5", "--delta", "1e-6", "--steps", "10", "--users", "200", "--clip-bound", "0.3", "--json"])
    payload = json.loads(capsys.readouterr().out)
    mechanism = GaussianGradientMechanism(clip_bound=0.3, num_users=200, privacy_mu=payload["mu"], num_steps=10)
    assert payload["target_epsilon"] == 0.5 and payload["delta"] == 1e-6 and payload["steps"] == 10
    assert payload["noise_std"] == mechanism.noise_std and payload["noise_multiplier"] == pytest.approx(
        mechanism.noise_multiplier
    )
    assert payload["epsilon"]["gdp_exact"] == pytest.approx(0.5, rel=1e-9)
    # without n and B: μ and the multiplier, and a pointer to the two options
    main(["--epsilon", "0.5", "--delta", "1e-6"])
    out = capsys.readouterr().out
    assert "give --users and --clip-bound" in out and "1 step(s)" in out


def test_mu_with_users_and_clip_bound_prints_the_noise_std(capsys):
    main(["--mu", "1", "--steps", "4", "--users", "10", "--clip-bound", "1"])
    numbers, table = _calibration(capsys.readouterr().out)
    assert numbers == {"multiplier": 2.0, "std": 0.4}  # sqrt(4)/1 and 2·1·2/(10·1)
    assert table["gdp_exact"] == pytest.approx(4.3772, abs=1e-4)
