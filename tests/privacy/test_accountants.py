r"""Tests for botorch_dp.privacy.accountants, against Opacus and dp_accounting."""

import json
import math
import subprocess
import sys
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from opacus.accountants import PRVAccountant, RDPAccountant, create_accountant

from botorch_dp.privacy.accountants import (
    TABLE_KEYS,
    GDPAccountant,
    accountant_epsilon,
    dp_sgd_rdp,
    epsilon_table,
    full_batch_steps,
    make_accountant,
)
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism

DELTA = 1e-5


def _pld_epsilon(noise_multipliers_and_steps, delta):
    accountant = PLDAccountant()
    for noise_multiplier, steps in noise_multipliers_and_steps:
        accountant.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise_multiplier), steps))
    return accountant.get_epsilon(delta)


def _step_all(accountants, noise_multipliers):
    for noise_multiplier in noise_multipliers:
        for accountant in accountants:
            accountant.step(noise_multiplier=noise_multiplier, sample_rate=1.0)


def test_gdp_accountant_basics():
    accountant = GDPAccountant()
    assert accountant.get_mu() == 0.0
    assert accountant.get_epsilon(DELTA) == 0.0
    opacus = RDPAccountant()
    sequence = [5.0] * 10 + [2.0] * 3 + [5.0] * 2
    _step_all([accountant, opacus], sequence)
    # Same run-length encoded history as Opacus.
    assert accountant.history == opacus.history
    assert len(accountant) == 15
    expected_mu = math.sqrt(12 / 25 + 3 / 4)
    assert accountant.get_mu() == pytest.approx(expected_mu, rel=1e-14)
    assert accountant.get_epsilon(DELTA) == pytest.approx(gdp_epsilon(expected_mu, DELTA), rel=1e-14)
    accountant.step(noise_multiplier=0.0)  # a non-private step
    assert accountant.get_mu() == math.inf
    assert accountant.get_epsilon(DELTA) == math.inf


def test_gdp_accountant_refuses_subsampling_and_bad_input():
    accountant = GDPAccountant()
    with pytest.raises(ValueError, match="full-batch"):
        accountant.step(noise_multiplier=1.0, sample_rate=0.01)
    with pytest.raises(ValueError, match="noise_multiplier"):
        accountant.step(noise_multiplier=-1.0)
    with pytest.raises(ValueError, match="noise_multiplier must be non-negative and finite"):
        accountant.step(noise_multiplier=math.inf)
    assert accountant.history == []


def test_gdp_accountant_state_dict_json_round_trip():
    accountant = GDPAccountant()
    _step_all([accountant], [3.0, 3.0, 4.0])
    state = json.loads(json.dumps(accountant.state_dict()))
    restored = GDPAccountant()
    restored.load_state_dict(state)
    assert restored.history == accountant.history
    assert restored.get_epsilon(DELTA) == accountant.get_epsilon(DELTA)
    with pytest.raises(ValueError, match="Cannot load"):
        restored.load_state_dict(RDPAccountant().state_dict())
    with pytest.raises(ValueError, match="must contain"):
        restored.load_state_dict({})
    with pytest.raises(ValueError, match="sample_rate=1.0"):
        restored.load_state_dict({"history": [[3.0, 0.5, 2]], "mechanism": "gdp_full_batch"})
    with pytest.raises(ValueError, match="num_steps"):
        restored.load_state_dict({"history": [[3.0, 1.0, 0]], "mechanism": "gdp_full_batch"})


def test_design_reference_25_steps():
    # design.md §5: 25 full-batch steps with noise multiplier 5 (μ = 1), δ = 1e-5.
    ours = make_accountant("gdp")
    rdp = make_accountant("rdp")
    prv = make_accountant("prv")
    _step_all([ours, rdp, prv], [5.0] * 25)
    assert ours.get_mu() == pytest.approx(1.0, rel=1e-14)
    exact = accountant_epsilon(ours, delta=DELTA)
    rdp_eps = accountant_epsilon(rdp, delta=DELTA)
    eps_error = 0.01
    prv_eps = accountant_epsilon(prv, delta=DELTA, eps_error=eps_error)
    assert exact == pytest.approx(4.3772, abs=1e-3)
    assert rdp_eps == pytest.approx(4.729, abs=1e-3)
    assert prv_eps == pytest.approx(4.387, abs=1e-3)
    # RDP is an upper bound, looser than the exact value.
    assert exact <= rdp_eps
    # PRV: the exact value lies inside the interval Opacus certifies, and its point
    # estimate is within eps_error of it.
    delta_error = DELTA / 1000
    with np.errstate(divide="ignore", invalid="ignore"):
        dprv = prv._get_dprv(eps_error=eps_error, delta_error=delta_error)
        lower, estimate, upper = dprv.compute_epsilon(DELTA, delta_error, eps_error)
    assert lower <= exact <= upper == pytest.approx(prv_eps)
    assert abs(estimate - exact) <= eps_error


def test_agrees_with_dp_accounting_pld():
    # Homogeneous (the design reference) and heterogeneous compositions.
    for steps_spec in ([(5.0, 25)], [(2.0, 3), (7.0, 10), (4.0, 1)]):
        ours = make_accountant("gdp", [(s, 1.0, n) for s, n in steps_spec])
        exact = accountant_epsilon(ours, delta=DELTA)
        pld = _pld_epsilon(steps_spec, DELTA)
        # The PLD accountant is pessimistic by construction and fine-grained.
        assert exact <= pld + 1e-6
        assert pld - exact <= 1e-3


def test_make_accountant_matches_direct_feeding():
    history = [(1.5, 0.01, 200), (3.0, 1.0, 5)]
    for name, cls in (("rdp", RDPAccountant), ("prv", PRVAccountant)):
        direct = cls()
        for noise_multiplier, sample_rate, steps in history:
            for _ in range(steps):
                direct.step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)
        made = make_accountant(name, history)
        assert isinstance(made, cls)
        assert made.history == direct.history
        assert accountant_epsilon(made, delta=DELTA) == accountant_epsilon(direct, delta=DELTA)
    with pytest.raises(ValueError, match="accountant must be one of"):
        make_accountant("moments")
    with pytest.raises(ValueError, match="num_steps"):
        make_accountant("rdp", [(1.0, 0.5, 2.5)])
    with pytest.raises(ValueError, match="sample_rate"):
        make_accountant("gdp", [(1.0, 0.5, 3)])
    with pytest.raises(ValueError, match="delta"):
        accountant_epsilon(make_accountant("gdp"), delta=1.5)


def test_dp_gibo_noise_multiplier():
    for clip_bound, num_users, mu, steps in [(3.0, 1000, 1.0, 25), (1.0, 50, 0.5, 150)]:
        mechanism = GaussianGradientMechanism(
            clip_bound=clip_bound, num_users=num_users, privacy_mu=mu, num_steps=steps
        )
        value = mechanism.noise_multiplier
        assert value == pytest.approx(math.sqrt(steps) / mu, rel=1e-14)
        sensitivity = 2 * clip_bound / num_users
        assert mechanism.sensitivity == pytest.approx(sensitivity, rel=1e-15)
        assert value == pytest.approx(mechanism.noise_std / sensitivity, rel=1e-14)
        # Feeding it to the accountant T times spends exactly μ.
        accountant = make_accountant("gdp", [(value, 1.0, steps)])
        assert accountant.get_mu() == pytest.approx(mu, rel=1e-14)
    no_noise = GaussianGradientMechanism(clip_bound=1.0, num_users=5, privacy_mu=math.inf, num_steps=3)
    assert no_noise.noise_multiplier == 0


def test_epsilon_table():
    table = epsilon_table(noise_multiplier=5.0, steps=25, delta=DELTA)
    assert list(table) == ["gdp_exact", "opacus_rdp", "opacus_prv", "zcdp_bun_steinke", "zcdp_cks"]
    assert tuple(table) == TABLE_KEYS
    # Exact is the smallest; CKS is the continuous-order version of Opacus's RDP
    # conversion; Bun–Steinke is the loosest.
    assert table["gdp_exact"] <= table["opacus_prv"] <= table["zcdp_cks"]
    assert table["zcdp_cks"] <= table["opacus_rdp"] <= table["zcdp_bun_steinke"]
    assert table["opacus_rdp"] - table["zcdp_cks"] < 1e-3
    same = epsilon_table(mu=1.0, steps=25, delta=DELTA)
    assert same == pytest.approx(table, rel=1e-12)
    one_step = epsilon_table(mu=1.0, delta=DELTA)
    for key in ("gdp_exact", "opacus_rdp", "zcdp_bun_steinke", "zcdp_cks"):
        assert one_step[key] == pytest.approx(table[key], rel=1e-9)
    assert abs(one_step["opacus_prv"] - table["opacus_prv"]) < 0.01
    assert all(value == math.inf for value in epsilon_table(mu=math.inf, delta=DELTA).values())
    with pytest.raises(ValueError, match="exactly one"):
        epsilon_table(mu=1.0, noise_multiplier=5.0, steps=25, delta=DELTA)
    with pytest.raises(ValueError, match="exactly one"):
        epsilon_table(delta=DELTA)
    with pytest.raises(ValueError, match="needs steps"):
        epsilon_table(noise_multiplier=5.0, delta=DELTA)
    with pytest.raises(ValueError, match="delta"):
        epsilon_table(mu=1.0, delta=0.0)


def test_gdp_accountant_is_in_opacus_registry():
    # Registered under its mechanism() name, like Opacus's own accountants; make_accountant
    # goes through the registry, and Opacus's "gdp" stays its GaussianAccountant.
    assert isinstance(create_accountant("gdp_full_batch"), GDPAccountant)
    assert type(make_accountant("gdp")) is GDPAccountant
    with pytest.warns(UserWarning, match="experimental"):  # Opacus's own GDP accountant
        assert type(create_accountant("gdp")) is not GDPAccountant
    assert type(make_accountant("rdp")) is RDPAccountant


def test_full_batch_steps():
    # μ = sqrt(T)/σ both ways, with the μ given kept as given.
    assert full_batch_steps(mu=1.0, steps=25) == (5.0, 25, 1.0)
    assert full_batch_steps(noise_multiplier=5.0, steps=25) == (5.0, 25, 1.0)
    assert full_batch_steps(mu=0.5) == (2.0, 1, 0.5)
    assert full_batch_steps(mu=math.inf, steps=3) == (0.0, 3, math.inf)
    assert full_batch_steps(noise_multiplier=0.0, steps=3) == (0.0, 3, math.inf)
    with pytest.raises(ValueError, match="noise_multiplier"):
        full_batch_steps(noise_multiplier=math.nan, steps=3)


def _dp_accounting_rdp(event, order, delta=1e-5):
    """The RDP of ``event`` at one order, read back from dp_accounting's ε at that order alone."""
    accountant = dp_accounting.rdp.RdpAccountant(orders=[order])
    accountant.compose(event)
    eps = accountant.get_epsilon(delta)
    return eps - math.log1p(-1 / order) + (math.log(delta) + math.log(order)) / (order - 1)


def _quadrature_rdp(sigma, rate, order):
    """One subsampled Gaussian step, from the definition: both directions of the Rényi divergence
    between μ0 = N(0, σ²) and μ = (1 − q)μ0 + qN(1, σ²), integrated numerically; the larger one."""
    from scipy import integrate, stats

    def log_ratio(z):  # log μ(z)/μ0(z)
        return np.logaddexp(math.log1p(-rate), math.log(rate) + (2 * z - 1) / (2 * sigma**2))

    def divergence(sign, power):
        def integrand(z):
            return math.exp(stats.norm.logpdf(z, scale=sigma) + sign * power * log_ratio(z))

        value, _ = integrate.quad(
            integrand,
            -40 * sigma,
            40 * sigma + order,
            epsabs=0,
            epsrel=1e-12,
            limit=1000,
            points=[0.0, 0.5, order - 0.5],
        )
        return math.log(value) / (order - 1)

    return max(divergence(1, order), divergence(-1, order - 1))


def test_dp_sgd_rdp_closed_form_quadrature_and_dp_accounting():
    orders = [1.5, 2.0, 4.7, 10.9, 12.0, 32.0, 80.0, 512.0]
    # Full batch: T Gaussian steps, ε(α) = T·α/(2σ²).
    full = dp_sgd_rdp(noise_multiplier=2.0, sample_rate=1.0, steps=3, orders=orders)
    assert full.dtype == np.float64 and full.shape == (len(orders),)
    assert full == pytest.approx([3 * a / 8 for a in orders], rel=1e-14)
    for sigma, rate, steps in [(1.1, 0.02, 100), (0.9, 0.05, 40), (2.0, 0.3, 7)]:
        ours = dp_sgd_rdp(noise_multiplier=sigma, sample_rate=rate, steps=steps, orders=orders)
        one_step = dp_sgd_rdp(noise_multiplier=sigma, sample_rate=rate, steps=1, orders=orders)
        assert ours == pytest.approx(steps * one_step, rel=1e-14)  # composition of T steps
        # Fractional and small integer orders: the definition, by quadrature.
        for order, value in zip(orders[:5], one_step[:5], strict=True):
            assert value == pytest.approx(_quadrature_rdp(sigma, rate, order), rel=1e-7)
        # Integer orders: dp_accounting's own computation of the subsampled Gaussian. (At
        # fractional orders dp_accounting sums the absolute values of the binomial series,
        # a looser bound than the exact value above.)
        event = dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(sigma)), steps
        )
        for order, value in zip(orders, ours, strict=True):
            if float(order).is_integer():
                assert value == pytest.approx(_dp_accounting_rdp(event, order), rel=1e-9)
    assert np.all(dp_sgd_rdp(noise_multiplier=0.0, sample_rate=0.1, steps=2, orders=orders) == np.inf)
    with pytest.raises(ValueError, match="sample_rate"):
        dp_sgd_rdp(noise_multiplier=1.0, sample_rate=0.0, steps=2, orders=orders)
    with pytest.raises(ValueError, match="steps"):
        dp_sgd_rdp(noise_multiplier=1.0, sample_rate=0.5, steps=0, orders=orders)
    for bad in ([], [1.0, 2.0], [2.0, math.inf], [[2.0]]):
        with pytest.raises(ValueError, match="orders"):
            dp_sgd_rdp(noise_multiplier=1.0, sample_rate=0.5, steps=2, orders=bad)


_NO_OPACUS = """
import sys, math, torch
from gpytorch.kernels import RBFKernel
import botorch_dp, botorch_dp.privacy, botorch_dp.privacy.ledger, botorch_dp.privacy.mechanisms, botorch_dp.optim
assert botorch_dp.__file__.startswith(sys.argv[1]), botorch_dp.__file__
assert "opacus" not in sys.modules, "importing botorch_dp loaded opacus"
bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
config = botorch_dp.DPGIBOConfig(
    bounds=bounds, kernel=RBFKernel(), num_iterations=2, privacy_mu=1.0, clip_bound=1.0,
    batch_size=2, raw_samples=8, num_restarts=1,
)
optimizer = botorch_dp.DPGIBO(config)
shifts = 0.1 * torch.arange(4.0, dtype=torch.float64)[:, None]
optimizer.run(lambda X: (X.unsqueeze(-2) - shifts).square().sum(-1), progress=False)
optimizer.ledger.report(1e-5)
assert optimizer.ledger.validation.mu() > 0
assert "opacus" not in sys.modules, "a DP-GIBO run loaded opacus"
botorch_dp.privacy.GDPAccountant  # the lazy names still resolve, and load it
assert "opacus" in sys.modules
"""


def test_importing_and_running_dp_gibo_does_not_load_opacus():
    root = Path(__file__).resolve().parents[2]
    completed = subprocess.run(
        [sys.executable, "-c", _NO_OPACUS, str(root)], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_dp_sgd_rdp_is_never_negative(monkeypatch):
    # Opacus's series has been seen to round to about -7e-12 at order 1.2 (reported from a
    # breast-cancer DP-SGD run); RDP is >= 0, and a negative value breaks the P&S bound.
    from botorch_dp.privacy import accountants
    from botorch_dp.privacy.accountants import dp_sgd_rdp

    real = accountants.compute_rdp
    monkeypatch.setattr(
        accountants,
        "compute_rdp",
        lambda **kw: np.where(np.asarray(kw["orders"]) < 1.25, -7e-12, np.asarray(real(**kw))),
    )
    orders = np.array([1.1, 1.2, 2.0, 32.0])
    rdp = dp_sgd_rdp(noise_multiplier=50.0, sample_rate=0.01, steps=10, orders=orders)
    assert np.all(rdp >= 0.0)
    assert rdp[2:] == pytest.approx(real(q=0.01, noise_multiplier=50.0, steps=10, orders=orders[2:]), rel=1e-12)
