"""scripts/released_bits_attack.py (issue 40, item 1): the attack finds nothing to read on this
version's releases, at smoke sizes, and its detector fires on continuous float noise."""

import pytest
import torch

from tests.helpers import loaded_script


@pytest.mark.timeout(300)
def test_smoke_run_reports_no_event_on_any_release():
    with loaded_script("released_bits_attack") as script:
        report = script.main(["--scores", "400", "--iterations", "2", "--tune-calls", "1", "--amp-coordinates", "200"])
        z = torch.randn(5000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.01
        assert script.fires(z, 0.01) > 100 and script.fires(0.01 + z, 0.01) == 0
    for side in report["score mechanism"].values():
        assert side["D"] == 0.0 and side["D'"] == 0.0 and side["n"] == 400
    assert report["tell gradients"] == {"D": 0, "coordinates": 8}
    assert report["tune scores"] == {"D": 0, "scores": 4}
    assert [side == {"D": 0.0, "D'": 0.0, "n": 200} for side in report["AMP outputs"].values()] == [True, True]
    assert len(report["sampler"]) == 6
