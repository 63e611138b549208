r"""``botorch_dp.methods.proxy``: the simulated noise equals the private run's (closed form), and a
proxy that does not return per-user losses is refused."""

import pytest

from botorch_dp.optim.options import AdaptiveNorm, Exponential, NoisyLoss
from botorch_dp.plan import plan_private_run, simulation_config
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from tests.optim.loop_helpers import normal_location
from tests.plan.plan_helpers import N_PRIVATE, N_PROXY, D
from tests.plan.plan_helpers import plan_config as _config


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(clip_bound="adaptive", clip_mu_fraction=0.3),
        dict(selection="noisy_loss", selection_mu=0.1, loss_clip=5.0),
        dict(selection="exponential", selection_epsilon=0.2, loss_clip=5.0),
        dict(noise_schedule="adaptive_norm", max_step_mu=0.1),
    ],
)
def test_simulation_draws_the_private_runs_noise(kw):
    # every release's noise on the scale of the mean, c/(n μ_j), is the same for n_p proxy users
    config = _config(**kw)
    sim = simulation_config(config, N_PRIVATE, N_PROXY, clip=config.clip)
    scale = N_PRIVATE / N_PROXY
    assert sim.mu_split.steps_mu == pytest.approx(scale * config.mu_split.steps_mu, rel=1e-12)
    assert sim.mu_split.gradient_mu * N_PROXY == pytest.approx(config.mu_split.gradient_mu * N_PRIVATE, rel=1e-12)
    if config.mu_split.clip_mu is not None:  # adaptive clipping
        assert sim.mu_split.clip_mu * N_PROXY == pytest.approx(config.mu_split.clip_mu * N_PRIVATE, rel=1e-12)
    if isinstance(config.selection, NoisyLoss):
        assert sim.selection.mu * N_PROXY == pytest.approx(config.selection.mu * N_PRIVATE, rel=1e-15)
        assert sim.selection.loss_clip == config.selection.loss_clip
    if isinstance(config.selection, Exponential):  # P(j) ∝ exp(−ε u_j n/(2C)): ε n is what matters
        assert sim.selection.epsilon * N_PROXY == pytest.approx(config.selection.epsilon * N_PRIVATE, rel=1e-15)
        assert sim.mu_split.selection_mu == pytest.approx(pure_dp_to_gdp_mu(sim.selection.epsilon), rel=1e-15)
    if isinstance(config.noise, AdaptiveNorm) and config.noise.max_step_mu is not None:
        assert sim.noise.max_step_mu * N_PROXY == pytest.approx(config.noise.max_step_mu * N_PRIVATE, rel=1e-15)
    assert sim.epsilon is None and sim.validation_mu_budget is None


def test_a_proxy_without_per_user_losses_is_refused():
    _, proxy = normal_location(n=N_PROXY, d=D)
    with pytest.raises(ValueError, match="per-user losses"):
        plan_private_run(lambda X: proxy(X).mean(-1, keepdim=True), _config(), num_users=N_PRIVATE)
