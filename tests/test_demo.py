import json
import math

from botorch_dp import demo
from botorch_dp.privacy.analysis.gdp import gdp_epsilon


def test_demo_runs_and_separates_private_from_non_private(tmp_path, capsys):
    out = tmp_path / "demo"
    summary = demo.main(
        [
            "--dim",
            "3",
            "--n-total",
            "200",
            "--iterations",
            "3",
            "--out",
            str(out),
            "--no-progress",
            "--raw-samples",
            "16",
            "--mu",
            "2",
        ]
    )
    printed = capsys.readouterr().out
    assert "NON-PRIVATE" in printed and "epsilon" in printed
    saved = json.loads((out / "demo_result.json").read_text())
    assert (out / "demo.png").stat().st_size > 0
    private = saved["private_release"]
    # the public part holds no loss values, only the release and its guarantee
    assert not any("loss" in key for key in private)
    g = private["guarantee"]
    assert math.isclose(g["mu"], 2.0) and math.isclose(g["epsilon"], gdp_epsilon(2.0, 1e-5))
    assert len(private["theta"]) == 3 and private["num_evaluations"] == sum(private["batch_sizes"])
    # random search got exactly as many evaluations as DP-GIBO used
    assert saved["non_private_diagnostics"]["random_search_evaluations"] == private["num_evaluations"]
    assert summary["private_release"]["num_evaluations"] >= 4


def test_demo_noise_is_secure_by_default_and_a_noise_seed_is_never_written(tmp_path, capsys):
    import warnings

    import pytest

    from botorch_dp import PrivacyWarning

    small = ["--dim", "2", "--n-total", "100", "--iterations", "2", "--no-progress", "--raw-samples", "8"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # no seed: OS entropy, no warning
        demo.main([*small, "--out", str(tmp_path / "a")])
    with pytest.warns(PrivacyWarning):
        demo.main([*small, "--out", str(tmp_path / "b"), "--noise-seed", "987654321"])
    printed = capsys.readouterr().out
    assert "987654321" not in printed
    assert "987654321" not in (tmp_path / "b" / "demo_result.json").read_text()
