r"""The private run that the plan tests plan for: its size, the proxy's, and its config."""

from tests.optim.loop_helpers import nl_config

D, N_PROXY, N_PRIVATE = 2, 30, 120
FAST = dict(num_restarts=1, raw_samples=8)


def plan_config(**kw):
    base = dict(privacy_mu=None, epsilon=1.0, delta=1e-5, num_iterations=2, step_size=0.5, **FAST)
    base.update(kw)
    return nl_config(d=D, **base)
