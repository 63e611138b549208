r"""The tuning methods: one protocol, one module per method, and the choice among them on a proxy.

``protocol`` is the ``Method`` protocol (resolve its settings from public facts and a PUBLIC
proxy; simulate on the proxy at the private run's noise; run privately, returning one
``MethodRun`` with one release and one guarantee per protected set) and ``MethodContext``.
One module per method, its algorithm's wrapper (the reference algorithms stay in
``botorch_dp.baselines``):

* ``dp_gibo``: DP-GIBO with the planned settings (``DPGIBOMethod``);
* ``enumerate``: DP-GIBO per categorical configuration, then a private choice by Gaussian
  scores (``EnumerateMethod``; ``tune``'s default on a mixed space);
* ``sampled``: Papernot–Steinke over DP-GIBO runs on drawn configurations (``SampledMethod``);
* ``private_random_search``: Papernot & Steinke's private random search;
* ``dp_hypo``: DP-HyPO (Wang et al.);
* ``training_selection``: Papernot–Steinke over whole DP-SGD (or AMP) training runs, the training records
  protected (``methods.training_runs``);
* ``proxy_then_train``: tune on a public proxy's data, then one DP-SGD training at the whole ε;
* ``subsample_tuning``: tune on one Poisson subsample of the training records, then one final
  training (Koskela & Kulkarni; the ε split stated);
* ``untuned``: one DP-SGD training at public defaults, the baseline tuning must beat;
* ``training_proxy``: a public proxy's data on which those four are simulated at their own noise;
* ``training_choice``: the choice among them on that proxy (``tune(method="auto", proxy=...)`` with
  a DP-SGD objective): the untuned run unless a tuning method beats it there, and the advice;
* ``default_rule``: the public rule ``tune(method="auto")`` follows without a proxy
  (``default_method``: the space's kinds of hyperparameters; ``picked_method``: which rule picked
  ``tune``'s method, in one line);
* ``choice``: every candidate simulated on the proxy with paired seeds, the best recommended
  (``compare_methods``, ``compare_in_context``).

The layer sits above ``optim``, ``baselines``, ``objectives`` and ``privacy``; ``plan`` (whose
step 5 is the method choice) and ``tuning`` (``tune`` and its results) use it
(docs/architecture.md). Every release a method makes goes through ``privacy.mechanisms`` and is
charged through the ledger's charge protocol. Names are imported
on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name → its module in this package.
_NAMES = {
    **dict.fromkeys(
        (
            "PROTECTED_SETS",
            "CandidateMethod",
            "ConfigurationRun",
            "Method",
            "MethodContext",
            "MethodRun",
            "MethodUnavailable",
            "SimulatedMethod",
        ),
        "protocol",
    ),
    "DPGIBOMethod": "dp_gibo",
    "EnumerateMethod": "enumerate",
    "SampledMethod": "sampled",
    **dict.fromkeys(("PrivateRandomSearchMethod", "proxy_loss_clip"), "private_random_search"),
    "DPHyPOMethod": "dp_hypo",
    "TrainingSelectionMethod": "training_selection",
    "ProxyThenTrainMethod": "proxy_then_train",
    "SubsampleTuningMethod": "subsample_tuning",
    "UntunedMethod": "untuned",
    "TrainingProxy": "training_proxy",
    **dict.fromkeys(("TRAINING_METHODS", "TrainingChoice", "choose_training_method"), "training_choice"),
    **dict.fromkeys(("DefaultMethod", "default_method", "picked_method"), "default_rule"),
    **dict.fromkeys(
        ("DEFAULT_METHODS", "MethodComparison", "MethodScore", "compare_in_context", "compare_methods"), "choice"
    ),
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        value = getattr(importlib.import_module(f"botorch_dp.methods.{_NAMES[name]}"), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
