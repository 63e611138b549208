r"""Cheap tuning of a DP-SGD-trained model, then ONE final DP-SGD training on all the data.

``tune_on_subsample``: the tuning trainings run on one Poisson subset of the training records
(each record in it with probability γ, drawn once), charged as ONE training mechanism whose RDP
curve is the trials' composed curve amplified by the subsampling (``cheap_plan``); the best
configuration is carried to the final run (``cheap_plan.CARRY_RULE``). After Koskela & Kulkarni
(NeurIPS 2023, arXiv 2301.11989), with their variant that trains the final model on all the data.
``tune_on_proxy_then_train``: the tuning trains on a PUBLIC proxy only (no privacy cost), then the
final run spends the whole ε. The ε split is the library's (``choose_tuning_share``) and is stated.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from botorch_dp.methods.cheap_plan import (
    CARRY_RULE,
    DEFAULT_SUBSAMPLE_FRACTION,
    DEFAULT_TUNING_SHARE,
    SHARE_GRID,
    CheapTuneResult,
    SubsamplePlan,
    final_only_noise,
    plan_subsample_tuning,
)
from botorch_dp.methods.proxy_search import (
    DEFAULT_FINALISTS,
    DEFAULT_REPEATS,
    ProxySearch,
    natural_configurations,
    with_defaults,
)
from botorch_dp.objectives.charged import TrainingTicket, shared_training_rows
from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.objectives.search_space import SearchSpace
from botorch_dp.objectives.torch_classifier import TorchModelTuningObjective
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import check_choice, check_delta, check_positive, check_positive_int, check_probability
from botorch_dp.privacy.ledger import DPSGDRun, Gaussian, TrainingMechanism
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.dp_sgd import DPSGDConfig
from botorch_dp.utils import child_seeds

__all__ = [
    "choose_tuning_share",
    "draw_poisson_subset",
    "share_streams",
    "simulated_share_loss",
    "tune_on_proxy_then_train",
    "tune_on_subsample",
]

#: What ``protect`` may be: ``"training"`` (validation data public: the best trial by its mean
#: validation loss) or ``"both"`` (the validation users too: the scores through the Gaussian
#: score mechanism at ``score_mu``).
PROTECT = ("training", "both")
#: The smallest expected subset size γ·m accepted (a public check, before anything is drawn).
MIN_EXPECTED_SUBSET = 10

Configuration = tuple[dict[str, Any], Tensor]  # (categorical choice, θ in the unit cube)


def draw_poisson_subset(num_records: int, fraction: float, *, seed: int | None = None) -> Tensor:
    r"""A Poisson subset: each of ``num_records`` indices kept independently with probability γ.

    Args:
        num_records: ``m``.
        fraction: γ in (0, 1).
        seed: ``None``: the generator is seeded from the OS's CSPRNG (``secrets.randbits(128)``), never
            stored (the subset is privacy randomness, like DP-SGD's batches). An integer: reproducible.

    Returns:
        The kept indices, sorted (a ``long`` tensor; its size is Binomial(m, γ)).
    """
    m = check_positive_int(num_records, "num_records")
    gamma = check_probability(fraction, "subsample_fraction")
    rng = np.random.default_rng(secrets.randbits(128) if seed is None else int(seed))
    return torch.as_tensor(np.flatnonzero(rng.random(m) < gamma), dtype=torch.long)


def _check_objective(objective: Any) -> TorchModelTuningObjective:
    if not isinstance(objective, TorchModelTuningObjective) or objective.run_dp_sgd is None:
        raise ValueError(
            "objective must be a TorchModelTuningObjective built with dp_sgd=DPSGDConfig(...) (its max_grad_norm is "
            f"kept; the noise is the procedure's), got {type(objective).__name__}"
            + ("" if not isinstance(objective, TorchModelTuningObjective) else " without dp_sgd")
            + "."
        )
    return objective


def _configurations(space: SearchSpace, tuner: Any, seed: int | None) -> list[Configuration]:
    r"""The public configurations tried: ``tuner`` random points (seeded by ``seed``) or the given ones."""
    if isinstance(tuner, (int, np.integer)) and not isinstance(tuner, bool):
        count = check_positive_int(int(tuner), "tuner")
        rng = np.random.default_rng(secrets.randbits(128) if seed is None else [int(seed), 41])
        choices = space.configurations()
        return [
            (
                dict(choices[int(rng.integers(len(choices)))]),
                torch.as_tensor(rng.random(space.dim), dtype=torch.float64),
            )
            for _ in range(count)
        ]
    if not isinstance(tuner, Sequence) or isinstance(tuner, str) or not tuner:
        raise ValueError(f"tuner must be a positive int or a non-empty list of configurations, got {tuner!r}.")
    return natural_configurations(space, tuner, "tuner")


def _natural(space: SearchSpace, config: Configuration) -> dict[str, Any]:
    values = space.to_natural(config[1], choice=config[0])
    assert isinstance(values, dict)  # a d-vector gives one dict
    return dict(values)


def _bound(objective: TorchModelTuningObjective, choice: dict[str, Any]) -> TorchModelTuningObjective:
    return objective.with_choice(choice) if choice else objective


def _common_checks(objective: Any, space: Any, epsilon: float, delta: float) -> tuple[Any, SearchSpace]:
    objective = _check_objective(objective)
    space = objective.space if space is None else space
    if not isinstance(space, SearchSpace) or space.names != objective.space.names:
        raise ValueError(f"space must be the objective's SearchSpace (or None), got {space!r}.")
    check_positive(epsilon, "epsilon", allow_inf=False)
    check_delta(delta)
    return objective, space


def _run_shape(objective: TorchModelTuningObjective) -> tuple[float, int, int]:
    r"""``(q, steps, k)`` of a run on the full training data (public: the objective's training config)."""
    planned = objective.planned_run()
    assert planned is not None  # a DP-SGD objective
    _, rate, steps = planned
    return rate, steps, round(1.0 / rate)


def _as_data(data: Any, name: str) -> ClassificationData:
    if isinstance(data, ClassificationData):
        return data
    if not isinstance(data, (tuple, list)) or len(data) not in (4, 6):
        raise ValueError(f"{name} must be a ClassificationData or a tuple (X_train, y_train, X_val, y_val[, ...]).")
    return ClassificationData(*data)


def _with_rows(data: ClassificationData, rows: Tensor) -> ClassificationData:
    return dataclasses.replace(data, X_train=data.X_train[rows], y_train=data.y_train[rows])


def _final_run(objective: TorchModelTuningObjective, config: Configuration, sigma: float) -> Any:
    r"""The one final DP-SGD training on all the data, charged through the objective's ledger (``train``)."""
    dp = DPSGDConfig(noise_multiplier=sigma, max_grad_norm=objective.run_dp_sgd.max_grad_norm)  # type: ignore[union-attr]
    final = objective.with_data(objective.data, dp_sgd=dp)  # same rows: the same ledger and run numbering
    return _bound(final, config[0]).train(config[1], label="final")


def _trial_losses(copy: TorchModelTuningObjective, configs: list[Configuration], run_id: str) -> Tensor:
    r"""The ``K x n`` validation losses of one trial per configuration (SENSITIVE), trained under tickets
    of the phase already charged as ``run_id`` (each checked against its planned run by ``evaluate_charged``)."""
    planned = copy.planned_run()
    assert planned is not None
    event = DPSGDRun(*planned)
    seeds = [None] * len(configs) if copy.noise_seed is None else child_seeds([copy.noise_seed, 41], len(configs))
    rows = []
    for j, (choice, theta) in enumerate(configs):
        ticket = TrainingTicket(f"{run_id}/trial-{j:03d}", event, seeds[j])
        rows.append(_bound(copy, choice).evaluate_charged(theta.reshape(1, -1), [ticket])[0])
    return torch.stack(rows)


def _subset_trials(
    objective: TorchModelTuningObjective, configs: list[Configuration], rows: Tensor, sigma: float, run_id: str
) -> Tensor:
    k = _run_shape(objective)[2]
    training = dataclasses.replace(objective.training, batches_per_epoch=k)
    dp = DPSGDConfig(noise_multiplier=sigma, max_grad_norm=objective.run_dp_sgd.max_grad_norm)  # type: ignore[union-attr]
    copy = objective.with_data(_with_rows(objective.data, rows), training=training, dp_sgd=dp)
    return _trial_losses(copy, configs, run_id)


def tune_on_subsample(
    objective: TorchModelTuningObjective,
    space: SearchSpace | None = None,
    *,
    epsilon: float,
    delta: float,
    subsample_fraction: float = DEFAULT_SUBSAMPLE_FRACTION,
    tuning_share: float | None = None,
    tuner: int | Sequence[Mapping[str, Any]] = 8,
    proxy: Any = None,
    protect: str = "training",
    score_mu: float | None = None,
    seed: int | None = None,
) -> CheapTuneResult:
    r"""Tune on one Poisson subset of the training records, then train once on all of them.

    1. The configurations (public: ``tuner`` random points of ``space`` from ``seed``, or a given
       list) and the split (``tuning_share``; else chosen on ``proxy`` by ``choose_tuning_share``;
       else ``DEFAULT_TUNING_SHARE``) fix the plan (``plan_subsample_tuning``): σ_t, σ_f, the
       run shape ``(q, steps)`` of the objective's training config.
    2. The tuning phase is charged to the objective's ledger as ONE ``TrainingMechanism`` (the K
       trials' composed RDP curve amplified by the subsampling) and recorded before anything is
       drawn; then the subset is drawn ONCE (OS entropy) and every trial trains on it by DP-SGD at
       σ_t with ``k`` Poisson batches per epoch (its ``(q, steps)`` public whatever the subset's
       size), each checked against the planned run.
    3. The best trial: lowest mean validation loss (``protect="training"``: the validation split is
       public), or lowest Gaussian-noised clipped score (``protect="both"``: ``score_mu``-GDP for
       the validation users, charged before the noise).
    4. The final run: the chosen hyperparameters, unchanged (``CARRY_RULE``), DP-SGD at σ_f on all
       the training data, charged through ``objective.train(..., label="final")``.

    Args:
        objective: A ``TorchModelTuningObjective`` built with ``dp_sgd=`` (its ``max_grad_norm`` and
            training config are used, its noise multiplier is not); its ledger records everything.
        space: The objective's ``SearchSpace`` (None: ``objective.space``).
        epsilon: ε of the whole procedure for the training records.
        delta: δ.
        subsample_fraction: γ in (0, 1).
        tuning_share: τ in (0, 1), fixed by the caller; None: chosen on ``proxy`` from ``SHARE_GRID``
            (``choose_tuning_share``), else ``cheap_plan.DEFAULT_TUNING_SHARE``.
        tuner: The number of random configurations, or a list of configurations (natural units).
        proxy: Optional PUBLIC data (``ClassificationData`` or tuple) to choose τ on (not read when
            ``tuning_share`` is given).
        protect: ``"training"`` or ``"both"``.
        score_mu: μ of all K scores together (``protect="both"`` only).
        seed: Public seed of the configurations and of the proxy simulation (``share_streams``).

    Returns:
        A ``CheapTuneResult``: ``split`` states τ and how it was chosen (given, the public default, or
        chosen on the proxy with each τ's simulated loss); ``settings["tuning_share"]`` holds
        ``{"value": τ, "chosen": "given" | "default" | "proxy", "proxy_losses": {τ: loss} or None}``.
    """
    objective, space = _common_checks(objective, space, epsilon, delta)
    gamma = check_probability(subsample_fraction, "subsample_fraction")
    check_choice(protect, "protect", PROTECT)
    if (protect == "both") != (score_mu is not None):
        raise ValueError(f"score_mu must be given exactly when protect='both', got score_mu={score_mu!r}.")
    if score_mu is not None:
        check_positive(score_mu, "score_mu", allow_inf=False)
    m = objective.num_training_records
    if gamma * m < MIN_EXPECTED_SUBSET:
        raise ValueError(
            f"subsample_fraction={subsample_fraction!r}: the expected subset gamma*m = {gamma * m:.3g} records "
            f"(m = {m}) is below {MIN_EXPECTED_SUBSET}; raise subsample_fraction."
        )
    configs = _configurations(space, tuner, seed)
    rate, steps, _ = _run_shape(objective)
    table: dict[float, float] | None = None  # the proxy's simulated loss per tau, when chosen there
    if tuning_share is not None:
        share, how, chosen_by = check_probability(tuning_share, "tuning_share"), "given", "given by the caller"
    elif proxy is not None:  # public data only: nothing private is read, nothing is charged
        share, table = choose_tuning_share(
            objective, proxy, configs, epsilon=epsilon, delta=delta, subsample_fraction=gamma, seed=seed
        )
        listed = ", ".join(f"tau = {t:g}: {v:.4g}" for t, v in table.items())
        how = "proxy"
        chosen_by = (
            f"chosen on the proxy: tau = {share:g} had the lowest simulated final loss of the grid ({listed}; "
            "the same subset and noise seeds for every tau)"
        )
    else:
        share, how, chosen_by = DEFAULT_TUNING_SHARE, "default", "the public default (no proxy to choose it on)"
    plan = plan_subsample_tuning(
        epsilon=epsilon,
        delta=delta,
        sample_rate=rate,
        steps=steps,
        num_trials=len(configs),
        subsample_fraction=gamma,
        tuning_share=share,
    )
    ledger = objective.ledger
    assert ledger is not None  # a constructed objective always holds one
    phase_id = f"{objective.run_prefix}-subset-tuning-{uuid.uuid4().hex[:12]}"
    event = TrainingMechanism(
        f"cheap tuning: {len(configs)} DP-SGD runs (sigma={plan.trial_noise_multiplier:.6g}, q={rate:.6g}, "
        f"steps={steps}) on one Poisson subset (gamma={gamma:g}), Zhu-Wang amplification",
        plan.phase_rdp,
    )
    with ledger.charge_training({phase_id: event}) as meter:
        meter.record(phase_id)  # before the subset and any noise is drawn
    subset_seed = None if objective.noise_seed is None else child_seeds([objective.noise_seed, 41, 1], 1)[0]
    rows = draw_poisson_subset(m, gamma, seed=subset_seed)
    losses = _subset_trials(objective, configs, rows, plan.trial_noise_multiplier, phase_id)
    validation: tuple[float, float] | None = None
    if score_mu is None:
        best = int(torch.argmin(losses.mean(-1)))
    else:
        assert objective.loss_cap is not None, "protect='both' needs a loss_cap on the objective"
        scorer = GaussianScoreMechanism(loss_clip=objective.loss_cap, per_trial_mu=score_mu / math.sqrt(len(configs)))
        with ledger.charge({"score": Gaussian(score_mu)}, run_id=f"{phase_id}-scores", new_run=True) as vmeter:
            best = int(torch.argmin(scorer.release(losses, meter=vmeter).scores))
        validation = (gdp_epsilon(score_mu, delta), delta)
    model = _final_run(objective, configs[best], plan.final_noise_multiplier)
    return CheapTuneResult(
        hyperparameters=_natural(space, configs[best]),
        model=model,
        method="subsample",
        guarantee={"training records": (plan.total_epsilon, delta), "validation users": validation},
        split=f"{plan.describe()}; tau {chosen_by}",
        carried=CARRY_RULE + f" (here {gamma:g}*{plan.final_noise_multiplier:.4g}/{plan.trial_noise_multiplier:.4g} = "
        f"{gamma * plan.final_noise_multiplier / plan.trial_noise_multiplier:.3g})",
        settings={
            "plan": plan,
            "configurations": [_natural(space, c) for c in configs],
            "phase_run_id": phase_id,
            "tuning_share": {"value": share, "chosen": how, "proxy_losses": table},
        },
        ledger=ledger,
        notes=(
            ()
            if validation is not None
            else (
                "validation users: the trials were compared on the validation split without noise "
                "(protect='training').",
            )
        ),
    )


def _check_public(objective: TorchModelTuningObjective, proxy: ClassificationData) -> None:
    shared = shared_training_rows(objective, proxy)
    if shared:
        raise ValueError(
            f"proxy shares {shared} training record(s) with the objective's private data; it is not public."
        )


def _proxy_copy(
    objective: TorchModelTuningObjective, proxy: ClassificationData, sigma: float, noise_seed: int | None = None
) -> Any:
    r"""The objective on the public proxy at the private final run's ``(q, steps)``, with σ scaled by
    ``m_proxy/m`` so that the per-step noise over the expected batch (σ/(q·m)) is the private run's;
    each of its runs draws its own noise stream (from ``noise_seed`` and its run index, or OS entropy)."""
    _check_public(objective, proxy)
    k = _run_shape(objective)[2]
    scaled = sigma * len(proxy.y_train) / objective.num_training_records
    dp = DPSGDConfig(noise_multiplier=scaled, max_grad_norm=objective.run_dp_sgd.max_grad_norm)  # type: ignore[union-attr]
    training = dataclasses.replace(objective.training, batches_per_epoch=k)
    with warnings.catch_warnings():  # a seeded copy on public data: no guarantee is at stake
        warnings.simplefilter("ignore", PrivacyWarning)
        return objective.with_data(proxy, dp_sgd=dp, training=training, noise_seed=noise_seed)  # its own ledger


def _proxy_best(copy: Any, configs: list[Configuration]) -> tuple[int, Tensor]:
    losses = torch.stack([_bound(copy, c)(t.reshape(1, -1))[0] for c, t in configs])  # public data
    return int(torch.argmin(losses.mean(-1))), losses.mean(-1)


def tune_on_proxy_then_train(
    objective: TorchModelTuningObjective,
    space: SearchSpace | None,
    proxy: Any,
    *,
    epsilon: float,
    delta: float,
    tuner: int | Sequence[Mapping[str, Any]] = 8,
    seed: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    finalists: int = DEFAULT_FINALISTS,
    defaults: Sequence[Mapping[str, Any]] | None = None,
) -> CheapTuneResult:
    r"""Tune on a PUBLIC proxy at no privacy cost, then one DP-SGD training on the private data at the whole ε.

    The proxy trials simulate the private final run: DP-SGD at its ``(q, steps)`` with σ_f scaled
    by ``m_proxy/m`` (the same noise per expected batch), compared by the proxy's own validation
    loss; they are charged to the proxy copy's own ledger, never to the objective's. A proxy that
    shares a training record with the objective is refused. The search (``methods.proxy_search``):
    the public ``defaults`` and the ``tuner``'s configurations are each trained ``repeats`` times on
    the proxy (own noise streams), the ``finalists`` best by their mean loss are trained ``repeats``
    more times with fresh noise, and the lowest fresh mean wins. Nothing private is read before
    the final run: its privacy is that of the one final run, whatever the search costs in time.

    Args:
        objective: As in ``tune_on_subsample``.
        space: The objective's space (None: ``objective.space``).
        proxy: Public data, a ``ClassificationData`` or a tuple (its validation split scores the trials).
        epsilon: ε of the final run (the whole procedure) for the training records.
        delta: δ.
        tuner: The number of random configurations, or a list of them (natural units).
        seed: Public seed of the configurations and of the proxy trainings' noise (``None``: OS entropy).
        repeats: Proxy trainings per candidate (and per finalist).
        finalists: Candidates retrained with fresh noise after the screening (1: none).
        defaults: Public default configurations always among the candidates (natural units; None:
            the centre of the space, the untuned run's default; ``()``: none).

    Returns:
        A ``CheapTuneResult`` (``method="proxy"``); ``settings["search"]`` holds the proxy scores.
    """
    objective, space = _common_checks(objective, space, epsilon, delta)
    search = ProxySearch(repeats, finalists)
    proxy = _as_data(proxy, "proxy")
    _check_public(objective, proxy)
    configs = with_defaults(space, _configurations(space, tuner, seed), defaults)
    rate, steps, _ = _run_shape(objective)
    sigma_f, final_epsilon = final_only_noise(epsilon=epsilon, delta=delta, sample_rate=rate, steps=steps)
    ledger = objective.ledger
    assert ledger is not None
    before = len(ledger.training.run_ids())
    noise_seed = None if seed is None else child_seeds([int(seed), 41, 2], 1)[0]
    copy = _proxy_copy(objective, proxy, sigma_f, noise_seed)

    def train_score(config: Configuration) -> float:
        return float(_bound(copy, config[0])(config[1].reshape(1, -1))[0].mean())  # public data

    outcome = search.choose(train_score, configs)
    if len(ledger.training.run_ids()) != before:
        raise RuntimeError("A proxy trial was charged to the private ledger; the proxy is not public.")
    best = outcome.index
    model = _final_run(objective, configs[best], sigma_f)
    return CheapTuneResult(
        hyperparameters=_natural(space, configs[best]),
        model=model,
        method="proxy",
        guarantee={"training records": (final_epsilon, delta), "validation users": (0.0, delta)},
        split=f"tuning share 0: the tuning used no private data; the final run alone spends epsilon = "
        f"{final_epsilon:.4g} (sigma_f = {sigma_f:.4g}, q = {rate:.4g}, {steps} steps)",
        carried="the proxy's best hyperparameters, unchanged; the proxy trials ran at the final run's q and steps "
        "with sigma_f * m_proxy/m",
        settings={
            "final_noise_multiplier": sigma_f,
            "configurations": [_natural(space, c) for c in configs],
            "search": {"repeats": search.repeats, **outcome.summary()},
        },
        ledger=ledger,
        notes=(
            f"The tuning used no private data: {outcome.trainings} trainings on the public proxy "
            f"({len(configs)} configurations, the defaults among them, {search.repeats} each, then the "
            f"{len(outcome.finalists)} best again with fresh noise; {len(proxy.y_train)} records, none shared "
            "with the training data), nothing recorded for them.",
        ),
    )


def share_streams(seed: int | None) -> tuple[int | None, int | None, int | None]:
    r"""The public seeds of ``choose_tuning_share``'s simulation: ``(subset, trials' noise, final run's noise)``,
    ``child_seeds([seed, 41, 3], 3)`` (``None``: each from OS entropy). The same three serve every τ."""
    if seed is None:
        return None, None, None
    subset, trials, final = child_seeds([int(seed), 41, 3], 3)
    return subset, trials, final


def _check_grid(grid: Sequence[float]) -> tuple[float, ...]:
    if isinstance(grid, str) or not isinstance(grid, Sequence) or not grid:
        raise ValueError(f"grid must be a non-empty sequence of tuning shares in (0, 1), got {grid!r}.")
    shares = tuple(check_probability(t, "grid") for t in grid)
    if len(set(shares)) < len(shares):
        raise ValueError(f"grid must hold distinct tuning shares, got {grid!r}.")
    return shares


def choose_tuning_share(
    objective: TorchModelTuningObjective,
    proxy: Any,
    configs: list[Configuration],
    *,
    epsilon: float,
    delta: float,
    subsample_fraction: float,
    grid: Sequence[float] = SHARE_GRID,
    seed: int | None = None,
) -> tuple[float, dict[float, float]]:
    r"""τ of ``grid`` whose simulated procedure does best on the public proxy (no privacy cost).

    For each τ: the plan on the PRIVATE data's public shape (``plan_subsample_tuning``: σ_t, σ_f),
    then on the proxy both phases with the same (q, steps) and σ's scaled by ``m_proxy/m``
    (``simulated_share_loss``): the trials on one Poisson γ-subset of the proxy's training split,
    the best by the proxy's validation loss, the final run on the whole proxy training split; its
    score is the final model's mean loss on the proxy's test split (its validation split without
    one). The comparison is paired: every τ uses the same subset and the same noise seeds
    (``share_streams(seed)``), so the τ's differ only in their σ's. The lowest score wins (a tie: the
    first in ``grid``). Only the objective's public shape is read (its size, ``planned_run``,
    training config, model and optimizer); it is never evaluated and its ledger is not charged.

    Args:
        objective: The private DP-SGD objective (its public shape only).
        proxy: PUBLIC data (``ClassificationData`` or a tuple); one sharing a training record with
            ``objective`` is refused.
        configs: The configurations the private run will try (public).
        epsilon: ε of the whole procedure for the training records.
        delta: δ.
        subsample_fraction: γ in (0, 1).
        grid: The τ's to compare, each in (0, 1) (default ``SHARE_GRID``).
        seed: Public seed of the simulation (``None``: OS entropy).

    Returns:
        ``(τ, {τ: simulated loss})``.
    """
    objective = _check_objective(objective)
    proxy = _as_data(proxy, "proxy")
    _check_public(objective, proxy)
    check_positive(epsilon, "epsilon", allow_inf=False)
    check_delta(delta)
    gamma = check_probability(subsample_fraction, "subsample_fraction")
    shares = _check_grid(grid)
    if not isinstance(configs, list) or not configs:
        raise ValueError(f"configs must be a non-empty list of (choice, theta) configurations, got {configs!r}.")
    rate, steps, _ = _run_shape(objective)
    subset_seed, trials_seed, final_seed = share_streams(seed)
    rows = draw_poisson_subset(len(proxy.y_train), gamma, seed=subset_seed)  # one subset for every τ: paired
    table: dict[float, float] = {}
    for share in shares:
        plan: SubsamplePlan = plan_subsample_tuning(
            epsilon=epsilon,
            delta=delta,
            sample_rate=rate,
            steps=steps,
            num_trials=len(configs),
            subsample_fraction=gamma,
            tuning_share=share,
        )
        table[share] = simulated_share_loss(objective, proxy, configs, plan, rows, (trials_seed, final_seed))
    return min(table, key=lambda t: table[t]), table


def simulated_share_loss(
    objective: TorchModelTuningObjective,
    proxy: ClassificationData,
    configs: list[Configuration],
    plan: SubsamplePlan,
    rows: Tensor,
    noise_seeds: tuple[int | None, int | None],
) -> float:
    r"""One τ's simulated procedure on the PUBLIC proxy (``choose_tuning_share``): the trials on the proxy's
    ``rows`` at ``σ_t·m_proxy/m`` (noise seed ``noise_seeds[0]``), the best by the proxy's validation loss,
    then the final run at ``σ_f·m_proxy/m`` on the whole proxy training split (``noise_seeds[1]``); the final
    model's mean test loss on the proxy (its validation loss without a test split)."""
    trials = _scaled_copy(objective, proxy, rows, plan.trial_noise_multiplier, noise_seeds[0])
    best, _ = _proxy_best(trials, configs)
    final = _proxy_copy(objective, proxy, plan.final_noise_multiplier, noise_seeds[1])
    metrics = _bound(final, configs[best][0]).evaluate_non_private(configs[best][1])
    score = metrics["test_loss"] if metrics["test_loss"] is not None else metrics["validation_loss"]
    return float(score)


def _scaled_copy(
    objective: TorchModelTuningObjective,
    proxy: ClassificationData,
    rows: Tensor,
    sigma: float,
    noise_seed: int | None = None,
) -> Any:
    r"""Trials on a γ-subset of the proxy with σ_t scaled by ``m_proxy/m`` (the subset's own size is
    random; the scale follows the proxy's, as the private trials' follows the private data's)."""
    full = _proxy_copy(objective, proxy, sigma, noise_seed)
    with warnings.catch_warnings():  # a seeded copy on public data: no guarantee is at stake
        warnings.simplefilter("ignore", PrivacyWarning)
        return full.with_data(_with_rows(proxy, rows), dp_sgd=full.run_dp_sgd)
