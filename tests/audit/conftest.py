import pytest
import torch

from botorch_dp.utils import torch_threads


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The audits run many tiny DP-GIBO runs: one torch thread each, as scripts/audit_privacy.py runs them
    (two threads on a busy 2-core machine made the runs several times slower)."""
    with torch_threads(1):
        yield


@pytest.fixture
def noiseless_design(monkeypatch):
    r"""``design(module, row, **options) -> (statistics on D, statistics on D′, claimed μs)``: runs an audit
    row of ``module`` with every Gaussian release exact (no noise drawn) and 4 runs per dataset, and
    returns what its samplers observed instead of the audit's verdict: the clean statistics show whether
    the neighbours differ by the design's sensitivity, the claims what the library reported."""
    from botorch_dp.audit.statistics import sample_both
    from botorch_dp.privacy.mechanisms import _noise

    monkeypatch.setattr(_noise, "release_on_grid", lambda statistic, noise, **kw: statistic.detach().clone())
    monkeypatch.setattr(_noise, "release_goe", lambda G, **kw: (G.detach().clone(), None))

    def design(module, row, **options):
        seen = {}

        def capture(name, sample_d, sample_d_prime, claimed_mu=None, **kwargs):
            seen["observations"] = sample_both(sample_d, sample_d_prime, num_runs=4, seed=0)

        monkeypatch.setattr(module, "run_audit", capture)
        row(num_runs=4, **options)
        obs_d, obs_d_prime = seen["observations"]
        claims = torch.cat([obs_d.claimed_mus, obs_d_prime.claimed_mus])
        return obs_d.statistics, obs_d_prime.statistics, claims

    return design
