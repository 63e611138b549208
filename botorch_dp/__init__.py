r"""botorch-dp: differentially private local Bayesian optimization (DP-GIBO).

The package offers the GIBO gradient-information acquisition as a BoTorch
acquisition function, a private local-BO loop, privacy accountants, baselines
and benchmark problems.
"""

__version__ = "0.1.0"
