"""optim.presets: presets fill settings (explicit ones win), combine without conflicts, and are
the settings whose measurements they cite."""

import re
import warnings
from pathlib import Path

import pytest
import torch
from gpytorch.kernels import RBFKernel

from benchmarks import dimension, options, paper
from botorch_dp import DPGIBOConfig
from botorch_dp.optim.options import SGD, AdaGrad, AdaptiveNorm, FixedBatches, FixedNoise
from botorch_dp.optim.presets import PRESETS, preset_settings

BOUNDS = torch.tensor([[0.05] * 3, [5.0] * 3], dtype=torch.float64)
KW = dict(bounds=BOUNDS, kernel=RBFKernel())
ROOT = Path(__file__).resolve().parents[2]


def test_a_preset_fills_settings_and_explicit_settings_win():
    config = DPGIBOConfig.from_preset("e1_reach", **KW)
    assert (config.step_rule, config.step_size, config.num_iterations) == (AdaGrad(), 1.0, 25)
    config = DPGIBOConfig.from_preset("e1_reach", **KW, step_size=0.5, num_iterations=7)
    assert (config.step_rule, config.step_size, config.num_iterations) == (AdaGrad(), 0.5, 7)
    plain = DPGIBOConfig(**KW)
    assert (plain.step_rule, plain.step_size, plain.noise) == (SGD(), 0.1, FixedNoise())  # untouched defaults


def test_presets_combine_and_refuse_conflicts_and_unknown_names():
    config = DPGIBOConfig.from_preset("e1_reach", "adaptive_noise", **KW)
    assert (config.step_size, config.noise) == (1.0, AdaptiveNorm())
    with pytest.raises(ValueError, match="'e1_reach' sets step_size=1.0 but 'paper' sets 0.3"):
        preset_settings("paper", "e1_reach")
    with pytest.raises(ValueError, match="unknown preset 'fast'"):
        DPGIBOConfig.from_preset("fast", **KW)
    with pytest.raises(ValueError, match="name at least one"):
        preset_settings()
    with pytest.raises(TypeError):
        PRESETS["paper"].settings["step_size"] = 2.0  # read-only


def test_presets_are_the_settings_their_reports_measured():
    # the benchmark settings behind each preset's evidence: a change to one must change the other
    p = paper.Settings()
    assert dict(PRESETS["paper"].settings) == {
        "step_rule": "adagrad",
        "step_size": p.step_size,
        "num_iterations": p.iterations,
    }
    d = dimension.Settings()
    assert PRESETS["e1_reach"].settings["step_size"] == d.preset_step_size
    assert PRESETS["paper"].settings["step_size"] == d.step_size
    assert PRESETS["e1_reach"].settings["num_iterations"] == d.iterations
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the benchmarks' settings may use the old keywords
        variant = DPGIBOConfig(**KW, **options.VARIANTS["adaptive_norm"])
        measured = DPGIBOConfig(**KW, acqf_maxiter=d.acqf_maxiter)
    assert DPGIBOConfig(**KW, **PRESETS["adaptive_noise"].settings).options == variant.options
    assert set(PRESETS["fast_search"].settings) == {"batches"}
    assert DPGIBOConfig(**KW, **PRESETS["fast_search"].settings).options == measured.options
    for name, preset in PRESETS.items():
        cited = re.findall(r"reports/[\w/.-]+", preset.evidence)
        assert cited, name
        for path in cited:
            assert (ROOT / path.rstrip(".:,")).exists(), (name, path)


def test_a_withdrawn_preset_still_fills_its_settings_but_warns_why():
    # fast_search is withdrawn (issue 43): the default search caps its warm runs already
    assert [name for name, p in PRESETS.items() if p.withdrawn] == ["fast_search"]
    with pytest.warns(DeprecationWarning, match=r"preset 'fast_search' is withdrawn.*WARM_MAXITER") as caught:
        config = DPGIBOConfig.from_preset("fast_search", **KW)
    assert caught[0].filename == __file__  # points at the caller
    assert config.batches == PRESETS["fast_search"].settings["batches"] == FixedBatches(maxiter=100)
    assert "reports/design_optimizer_speed.md" in PRESETS["fast_search"].withdrawn
    assert (ROOT / "reports/design_optimizer_speed.md").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the others do not warn
        DPGIBOConfig.from_preset("paper", "adaptive_noise", **KW)
