"""benchmarks.dimension_task: the generating length-scales are sparse (``relevant``
short ones in their range, the rest at ``irrelevant_lengthscale``) and a function of (d, seed)."""

import torch

from benchmarks import dimension_task as D


def test_generating_lengthscales_sparse():
    s = D.Settings()
    for dim, seed in ((5, 0), (30, 3), (100, 1)):
        ell = D.generating_lengthscales(s, dim, seed)
        short = ell < s.irrelevant_lengthscale
        assert int(short.sum()) == s.relevant
        assert bool(((ell[short] >= s.relevant_low) & (ell[short] <= s.relevant_high)).all())
        assert torch.equal(ell, D.generating_lengthscales(s, dim, seed))
    assert not torch.equal(D.generating_lengthscales(s, 30, 0), D.generating_lengthscales(s, 30, 1))
