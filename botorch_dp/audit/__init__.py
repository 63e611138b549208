r"""Empirical privacy audits: statistical lower bounds on the μ (or, for an ``(ε, δ)`` claim,
the ε at δ) each release of the package really spends, measured on the path a user takes.

``statistics`` holds the test (rates, Clopper–Pearson bounds, trade-off curves,
``run_audit``); ``registry`` the rows and ``audit_all``. Each scenario module registers its
rows on import, in the order listed here, which is the order of ``audit_all``:

- ``gradient``: DP-GIBO's fixed-schedule release (seeded, overflowing losses, OS-entropy
  noise) and a whole ``DPGIBO.run``;
- ``adaptive_norm``: ``noise_schedule="adaptive_norm"`` in DP-GIBO and in noisy GD;
- ``ledger_retries``: the adaptive schedule under a tight shared ledger, refused steps retried;
- ``selection``: ``selection="exponential"``;
- ``subspace``: a public-subspace release and the private AdaGrad preconditioner;
- ``adaptive_clip``: ``clip_bound="adaptive"``'s noisy count;
- ``baselines``: private random search's and DP-HyPO's trial scores;
- ``amp``: one AMP training release through ``fit_amp``;
- ``one_call``: ``tune``'s noisy score of a configuration (its choice among configurations);
- ``training_selection``: the released score of a private selection over training runs
  (``protect="both"``), against the profile's ``(ε, δ)`` charge on the validation users.

Every row drives the library the way a user does (``DPGIBO`` ``ask``/``tell`` or ``run``,
the baseline functions, ``fit_amp``, ``tune``), reads its statistic from what the call returns and
its claim from what the library reports for that run (its ledger or guarantee). This
package sits above ``optim``, ``baselines``, ``training`` and ``tuning``; ``privacy`` does not import it.
"""

# the scenario modules register their rows on import, in this order (the order of audit_all)
from botorch_dp.audit import gradient  # noqa: F401, I001
from botorch_dp.audit import adaptive_norm  # noqa: F401
from botorch_dp.audit import ledger_retries  # noqa: F401
from botorch_dp.audit import selection  # noqa: F401
from botorch_dp.audit import subspace  # noqa: F401
from botorch_dp.audit import adaptive_clip  # noqa: F401
from botorch_dp.audit import baselines  # noqa: F401
from botorch_dp.audit import amp  # noqa: F401
from botorch_dp.audit import one_call  # noqa: F401
from botorch_dp.audit import training_selection  # noqa: F401
from botorch_dp.audit.registry import AuditRow, audit_all, audit_row, registered_rows
from botorch_dp.audit.statistics import (
    AuditResult,
    Observations,
    StatisticSampler,
    TradeOffCurve,
    assess,
    clopper_pearson_upper,
    epsilon_lower_from_rates,
    gdp_mu_from_rates,
    point_rate,
    reported_mu,
    run_audit,
    sample_both,
    tradeoff_from_profile,
    tradeoff_mu,
)

__all__ = [
    "AuditResult",
    "AuditRow",
    "Observations",
    "StatisticSampler",
    "TradeOffCurve",
    "assess",
    "audit_all",
    "audit_row",
    "clopper_pearson_upper",
    "epsilon_lower_from_rates",
    "gdp_mu_from_rates",
    "point_rate",
    "registered_rows",
    "reported_mu",
    "run_audit",
    "sample_both",
    "tradeoff_from_profile",
    "tradeoff_mu",
]
