r"""Where privacy noise gets its randomness (botorch_dp/privacy/seeding.py): no seed gives no generator
and no warning (the mechanisms then use OS entropy); a seed gives a reproducible generator per child
stream, distinct across streams and seeds, and a ``PrivacyWarning`` pointing at the caller."""

import warnings

import pytest
import torch

from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator


def test_no_seed_gives_no_generator_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert noise_generator(None) is None and noise_generator(None, stream=3) is None


def test_a_seed_warns_at_the_caller_and_reproduces_its_stream():
    with pytest.warns(PrivacyWarning, match="A noise seed was given.*Leave seed=None") as record:
        a = noise_generator(7, stream=1, stacklevel=2)
    assert record[0].filename == __file__
    with pytest.warns(PrivacyWarning):
        draws = {
            (seed, stream): torch.randn(4, generator=noise_generator(seed, stream=stream), dtype=torch.float64)
            for seed in (7, 8)
            for stream in (0, 1)
        }
    assert torch.equal(torch.randn(4, generator=a, dtype=torch.float64), draws[(7, 1)])
    assert len({tuple(v.tolist()) for v in draws.values()}) == 4  # streams and seeds never share draws
    assert a.device.type == "cpu"


def test_explicit_noise_seed_warns_and_is_reproducible():
    from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator

    assert noise_generator(None) is None
    with pytest.warns(PrivacyWarning, match="reproducible"):
        g1 = noise_generator(3)
    with pytest.warns(PrivacyWarning):
        g2, other = noise_generator(3), noise_generator(3, stream=1)
    assert torch.equal(torch.randn(4, generator=g1), torch.randn(4, generator=g2))
    assert not torch.equal(torch.randn(4, generator=g1), torch.randn(4, generator=other))
