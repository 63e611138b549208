r"""Pure privacy-analysis functions: μ-GDP (``gdp``), zCDP (``zcdp``), the discrete Gaussian on a
public grid that every Gaussian release uses (``discrete_gaussian``), the RDP→(ε, δ)
conversion (``rdp``), the Rényi-DP bounds of private selection (``private_selection``) and
the RDP curves and privacy profiles of objective perturbation / AMP
(``objective_perturbation``), the Rényi-DP bound of DP-HyPO's adaptive selection
(``dp_hypo``), the privacy-profile bound of private selection (``selection_profile``) and a
DP-SGD trial as its base (``dp_sgd_selection``).

No state and no torch: floats in, floats out, checked against published values and
against ``dp_accounting``.
"""

from botorch_dp.privacy.analysis.discrete_gaussian import (
    DiscreteGaussianNoise,
    calibrate_discrete_gaussian,
    discrete_gaussian_grid,
    discrete_gaussian_log_delta,
    discrete_gaussian_mu,
    discrete_gaussian_zcdp,
    grid_sensitivity,
)
from botorch_dp.privacy.analysis.dp_hypo import (
    adaptivity_log_factors,
    check_ratio_bounds,
    dp_hypo_epsilon,
    dp_hypo_epsilon_generic,
    dp_hypo_rdp,
    dp_hypo_rdp_curve,
)
from botorch_dp.privacy.analysis.dp_sgd_selection import (
    dp_sgd_privacy_profile,
    dp_sgd_rdp_curve,
    max_rdp_curve,
    reference_trial_curves,
    selection_training_rdp,
)
from botorch_dp.privacy.analysis.gdp import (
    compose_gdp,
    gaussian_noise_std_for_mu,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_mu_from_noise,
)
from botorch_dp.privacy.analysis.objective_perturbation import (
    amp_delta,
    amp_epsilon,
    amp_rdp,
    amp_rdp_epsilon,
    calibrate_amp,
    gaussian_profile_delta,
    kifer_delta,
    objpert_delta,
    objpert_epsilon,
    objpert_rdp,
    objpert_rdp_epsilon,
)
from botorch_dp.privacy.analysis.private_selection import (
    DISTRIBUTIONS,
    per_trial_mu_for_epsilon,
    poisson_mean_for_tail,
    private_selection_epsilon,
    private_selection_epsilon_generic,
    private_selection_rdp,
    private_selection_rdp_curve,
    private_selection_rdp_generic,
    sample_num_trials,
    tnb_gamma_for_mean,
    tnb_log_pmf,
    tnb_mean,
)
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_delta, rdp_curve_epsilon, rdp_to_epsilon
from botorch_dp.privacy.analysis.selection_profile import (
    SELECTION_DISTRIBUTIONS,
    PrivacyProfile,
    max_privacy_profile,
    selection_delta_pld,
    selection_epsilon_pld,
)
from botorch_dp.privacy.analysis.zcdp import compose_zcdp, gaussian_zcdp, gdp_to_zcdp, zcdp_epsilon, zcdp_epsilon_cks

__all__ = [
    "DEFAULT_RDP_ORDERS",
    "DISTRIBUTIONS",
    "DiscreteGaussianNoise",
    "calibrate_discrete_gaussian",
    "discrete_gaussian_grid",
    "discrete_gaussian_log_delta",
    "discrete_gaussian_mu",
    "discrete_gaussian_zcdp",
    "grid_sensitivity",
    "SELECTION_DISTRIBUTIONS",
    "PrivacyProfile",
    "dp_sgd_privacy_profile",
    "dp_sgd_rdp_curve",
    "max_privacy_profile",
    "max_rdp_curve",
    "reference_trial_curves",
    "selection_delta_pld",
    "selection_epsilon_pld",
    "selection_training_rdp",
    "adaptivity_log_factors",
    "check_ratio_bounds",
    "dp_hypo_epsilon",
    "dp_hypo_epsilon_generic",
    "dp_hypo_rdp",
    "dp_hypo_rdp_curve",
    "amp_delta",
    "amp_epsilon",
    "amp_rdp",
    "amp_rdp_epsilon",
    "calibrate_amp",
    "compose_gdp",
    "compose_zcdp",
    "gaussian_noise_std_for_mu",
    "gaussian_profile_delta",
    "gaussian_zcdp",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_mu_from_noise",
    "gdp_to_zcdp",
    "kifer_delta",
    "objpert_delta",
    "objpert_epsilon",
    "objpert_rdp",
    "objpert_rdp_epsilon",
    "per_trial_mu_for_epsilon",
    "poisson_mean_for_tail",
    "private_selection_epsilon",
    "private_selection_epsilon_generic",
    "private_selection_rdp",
    "private_selection_rdp_curve",
    "private_selection_rdp_generic",
    "rdp_curve_delta",
    "rdp_curve_epsilon",
    "rdp_to_epsilon",
    "sample_num_trials",
    "tnb_gamma_for_mean",
    "tnb_log_pmf",
    "tnb_mean",
    "zcdp_epsilon",
    "zcdp_epsilon_cks",
]
