r"""The objectives: what the methods and ``tune`` evaluate, below every method.

``per_user_problem`` (``PerUserProblem``, the per-user benchmark losses), ``search_space`` and
``discrete`` (the hyperparameters and their public encoding), ``datasets``, ``charged`` and
``covered`` (objectives that charge their own evaluations to a ledger, or run under a selection's
up-front charge), ``torch_classifier`` (``TorchModelTuningObjective``), ``non_private``,
``per_example`` and ``noise_estimate``. They import ``training``, ``privacy`` and ``utils`` only
(docs/architecture.md); ``botorch_dp.tuning`` re-exports the public names.
"""
