r"""The capped adaptive clip (botorch_dp/optim/options/capped_clip.py): the bound moves as
``QuantileClip``'s, ``B_{t+1} = min(B_t exp(−η_C(b̃_t/n − γ)), B_max)`` from the released counts
(recomputed here from the closed form), never above ``B_max``; the counts are charged as the
wrapped ``QuantileClip``'s (``μ_C/√T`` each, ``μ_C = μ√f_C``) and the cap costs nothing; until the
cap binds the run is the uncapped run bit for bit, and the gradient noise follows the capped bound
(``σ_t = 2B_t√T/(nμ_g)``). It is registered and rebuilt from its ``spec()``, refuses bad settings
naming the field, and a checkpointed run resumes from the checkpoint alone (its bounds replayed
from the counts) and continues bit for bit."""

import json
import math
import warnings

import pytest

from botorch_dp.optim import DPGIBO
from botorch_dp.optim.options import QuantileClip, from_spec, lookup
from botorch_dp.optim.options.capped_clip import CappedQuantileClip
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import N, _encode_release, _objective, _settings

CAP, B0, GAMMA, ETA, F_C, T, MU = 0.1, 0.05, 0.5, 1.0, 0.2, 4, 1.0


def _clip() -> CappedQuantileClip:
    return CappedQuantileClip(CAP, B0, GAMMA, ETA, F_C)


def _run(clip, checkpoint_dir=None, stop_after=None):
    config = config_with(_settings({"num_iterations": T, "privacy_mu": MU}), clip=clip)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning
        opt = DPGIBO(config, checkpoint_dir=checkpoint_dir)
        stop = None if stop_after is None else (lambda info: info.iteration == stop_after)
        release = opt.run(_objective, progress=False, callback=stop).release
    return opt, release


def test_it_is_registered_and_rebuilt_from_its_spec():
    clip = _clip()
    assert lookup("clip", "capped_adaptive") is CappedQuantileClip and clip.key == "clip:capped_adaptive"
    assert clip.spec() == {
        "kind": "capped_adaptive",
        "max_bound": CAP,
        "bound": B0,
        "quantile": GAMMA,
        "learning_rate": ETA,
        "fraction": F_C,
    }
    assert from_spec("clip", json.loads(json.dumps(clip.spec()))) == clip
    assert clip.base == QuantileClip(B0, GAMMA, ETA, F_C) and not isinstance(clip, QuantileClip)  # it wraps one


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: CappedQuantileClip(0.0), r"max_bound \(B_max\) must be"),
        (lambda: CappedQuantileClip(math.inf), r"max_bound \(B_max\) must be"),
        (lambda: CappedQuantileClip(0.5, 1.0), r"max_bound \(B_max\) = 0.5 is below clip_init \(B₀\) = 1.0"),
        (lambda: CappedQuantileClip(2.0, 1.0, 1.5), r"clip_quantile \(γ\)"),
        (lambda: CappedQuantileClip(2.0, 1.0, 0.5, 0.0), r"clip_learning_rate \(η_C\)"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()


def test_the_bound_moves_in_closed_form_under_the_cap_and_the_counts_are_charged_as_quantile_clips():
    opt, release = _run(_clip())
    record = release.records["clip"]
    bounds, counts = list(record.bounds), list(record.counts)
    expected = [B0]
    for count in counts:  # the closed form of the update, capped
        expected.append(min(expected[-1] * math.exp(-ETA * (count / N - GAMMA)), CAP))
    assert bounds == pytest.approx(expected, rel=1e-12) and max(bounds) == CAP  # the cap binds in this run
    assert _clip().replay(counts, N) == bounds  # resume's recomputation, bit for bit
    # the gradient noise follows the capped bound: σ_t = 2 B_t √T / (n μ_g), μ_g = μ √(1 − f_C)
    mu_g = MU * math.sqrt(1.0 - F_C)
    assert release.noise_stds == pytest.approx([2.0 * b * math.sqrt(T) / (N * mu_g) for b in bounds[:T]], rel=1e-12)
    # each count is charged μ_C/√T with μ_C = μ √f_C, as the wrapped QuantileClip's; the run spends μ
    charged = [r.event.mu for r in opt.ledger.validation.records(opt.run_id) if r.key.endswith("/clip")]
    assert charged == pytest.approx([MU * math.sqrt(F_C) / math.sqrt(T)] * T, rel=1e-12)
    assert release.guarantee.mu == pytest.approx(MU, rel=1e-12)


def test_until_the_cap_binds_it_is_the_uncapped_run_bit_for_bit():
    _, capped = _run(_clip())
    _, uncapped = _run(QuantileClip(B0, GAMMA, ETA, F_C))
    binds = next(t for t, b in enumerate(uncapped.records["clip"].bounds) if b > CAP)  # the first bound it cuts
    assert capped.records["clip"].bounds[:binds] == uncapped.records["clip"].bounds[:binds]
    assert capped.records["clip"].counts[:binds] == uncapped.records["clip"].counts[:binds]
    assert capped.records["clip"].bounds[binds] == CAP < uncapped.records["clip"].bounds[binds]


def test_a_checkpointed_run_resumes_without_the_config_and_continues_bit_for_bit(tmp_path):
    whole_opt, whole = _run(_clip())
    partial, _ = _run(_clip(), checkpoint_dir=tmp_path / "ck", stop_after=2)
    partial.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed = DPGIBO.resume(tmp_path / "ck")  # rebuilt from its spec; its bounds replayed from the counts
        assert resumed.config.clip == _clip() and resumed.iteration == 2
        release = resumed.run(_objective, progress=False).release
    assert _encode_release(resumed, release) == _encode_release(whole_opt, whole)
    resumed.close()
