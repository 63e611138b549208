r"""The choice among the methods that protect the training records, simulated on a PUBLIC proxy's data.

``choose_training_method`` builds the candidates of ``tune(method="auto", proxy=...)`` for a
DP-SGD objective with ``protect="training"`` or ``"both"``: private selection over whole training
runs (``training_selection``), tuning on a Poisson subsample (``subsample_tuning``) and tuning on the
proxy then one final training (``proxy_then_train``). Each is simulated on the proxy with paired
seeds (repeat ``j`` of every method uses seed ``j``) at ITS OWN noise: the σ its private run would
draw at the user's ``(ε, δ)``, scaled to the proxy's size (``methods.training_proxy``), and each
choice at the precision of the users its real run chooses on, as far as the proxy allows: the
selection and the subsample method choose in their private runs on the objective's ``n`` validation
users, so their simulated choice is made once per scoring-half user on all the proxy's other users
(with the real run's extra sampling noise added where ``n`` is smaller; ``n_p - 1`` users where ``n``
is larger), not on the fitting half alone (``TrainingProxy.held_out_scores``); ``proxy_then_train``
chooses by the proxy's FITTING half. Every procedure is scored by its released model's loss on the
SCORING half's users, none of which took part in the choice it scores (``methods.proxy_split``). The
lowest mean wins; a tie within one paired standard error goes to the method with fewer private
trainings, and the table's note says so (``methods.choice.recommend``).

One untuned run (``methods.untuned``: the public defaults, the whole ``ε``) is simulated alongside
and listed last. When the recommended tuning method does not beat it by more than one paired
standard error (``untuned_wins``: tuning is not expected to beat one untuned run), ``"auto"``
recommends the untuned run, so one untuned training is run, and ``untuned_advice`` says so (``tune``
carries that in the result and a warning; a tuning method can still be forced by name). The burden
of proof is on tuning: at a fixed ``ε`` the untuned run spends it all on one training, and on the
dpsgd benchmark the untuned run at the centre of the space was within 0.02 test accuracy of the
seed's best tuning method on average (``reports/dpsgd-auto2/auto-choice.md``).

Everything here reads only the proxy's data and public settings: the private objective is used for
its public shape and never evaluated.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from botorch_dp.methods.choice import MethodComparison, MethodScore, recommend
from botorch_dp.methods.protocol import MethodContext, MethodUnavailable
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.methods.proxy_then_train import DEFAULT_CONFIGURATIONS, ProxyThenTrainMethod
from botorch_dp.methods.subsample_tuning import SubsampleTuningMethod
from botorch_dp.methods.training_proxy import TrainingProxy
from botorch_dp.methods.training_selection import TrainingSelectionMethod
from botorch_dp.methods.untuned import UntunedMethod
from botorch_dp.utils import progress_bar, progress_stage

__all__ = [
    "TRAINING_METHODS",
    "TUNING_METHODS",
    "TrainingChoice",
    "choose_training_method",
    "training_method",
    "untuned_advice",
    "untuned_wins",
]

#: ``tune``'s names of the methods that protect the training records.
TRAINING_METHODS = ("training_selection", "subsample_tuning", "proxy_then_train", "untuned")
#: The tuning methods ``"auto"`` compares (the untuned run is simulated too, as the baseline, and chosen when
#: the best of them does not beat it by more than one paired standard error: ``untuned_wins``).
TUNING_METHODS = TRAINING_METHODS[:3]
#: The paired repeats of the comparison by default.
DEFAULT_REPEATS = 3


@dataclass(frozen=True)
class TrainingChoice:
    r"""The method ``tune`` runs, the comparison that chose it (``None``: none made) and the advice."""

    winner: Any
    comparison: MethodComparison | None = None
    advice: str | None = None


def training_method(
    name: str,
    space: Any,
    *,
    epsilon: float,
    delta: float,
    protect: str,
    proxy_data: Any = None,
    mean_trials: float = 4.0,
    max_trials: int | None = None,
    loss_clip: float | None = None,
    num_configurations: int = DEFAULT_CONFIGURATIONS,
    untuned: dict[str, Any] | None = None,
    accounting: str = "auto",
    distribution: str = "tnb",
    tnb_eta: float = 1.0,
    binomial_rounds: int | None = None,
    tuning_share: float | None = None,
    mechanism: str | None = None,
) -> Any:
    r"""The method called ``name`` (``TRAINING_METHODS``) at the call's settings (public); ``accounting``
    and ``K``'s ``distribution`` (with ``tnb_eta``, ``binomial_rounds``) are the selection's over training
    runs (``select_training_runs``; ``mechanism``: what the objective trains a run with, which it states),
    ``tuning_share`` subsample tuning's τ (``None``: its default, or chosen on the proxy when ``tune`` runs it),
    the others' are fixed."""
    if name == "training_selection":
        return TrainingSelectionMethod(
            space, epsilon, delta, mean_trials, protect, distribution, max_trials=max_trials, loss_clip=loss_clip,
            accounting=accounting, binomial_rounds=binomial_rounds, tnb_eta=tnb_eta, mechanism=mechanism,
        )  # fmt: skip
    if name == "subsample_tuning":
        return SubsampleTuningMethod(space, epsilon, delta, protect, num_configurations, tuning_share=tuning_share)
    if name == "proxy_then_train":
        if proxy_data is None:
            raise ValueError("method='proxy_then_train' needs proxy= (public data to tune on).")
        return ProxyThenTrainMethod(space, epsilon, delta, proxy_data, num_configurations)
    if name == "untuned":
        return UntunedMethod(space, epsilon, delta, untuned)
    raise ValueError(f"method must be one of {TRAINING_METHODS} here, got {name!r}.")


def choose_training_method(
    objective: Any,
    space: Any,
    proxy_data: Any,
    *,
    epsilon: float,
    delta: float,
    protect: str,
    context: MethodContext,
    mean_trials: float = 4.0,
    max_trials: int | None = None,
    loss_clip: float | None = None,
    num_configurations: int = DEFAULT_CONFIGURATIONS,
    num_repeats: int = DEFAULT_REPEATS,
    untuned: dict[str, Any] | None = None,
    methods: Any = None,
    seed: int = 0,
    progress: bool = False,
    accounting: str = "auto",
    tuning_share: float | None = None,
    mechanism: str | None = None,
    **k_distribution: Any,
) -> TrainingChoice:
    r"""Simulate every candidate on ``proxy_data`` (PUBLIC) and choose (see the module).

    Args:
        objective: The private DP-SGD objective (its public shape only; never evaluated).
        space: Its ``SearchSpace``.
        proxy_data: The proxy's ``ClassificationData`` (public).
        epsilon: The private run's ε.
        delta: The private run's δ.
        protect: ``"training"`` or ``"both"``.
        context: The public ``MethodContext`` the table states.
        mean_trials: The selection's ``E[K]``.
        max_trials: The selection's public maximum number of trials (``None``: none).
        loss_clip: The selection's score clip.
        num_configurations: The configurations the cheap methods try.
        num_repeats: Paired repeats (seeds ``seed, seed + 1, ...``).
        untuned: The untuned run's public defaults in natural units (``None``: the centre of the space).
        methods: The names compared, among ``TUNING_METHODS`` (``None``: all three).
        seed: The first repeat's seed and the proxy split's (public).
        progress: One bar over the simulations.
        accounting: The selection's accounting over training runs if it wins (``select_training_runs``).
        tuning_share: Subsample tuning's τ when the caller fixed it (simulated at it), ``None``: simulated at the
            default τ (``SubsampleTuningMethod``).
        mechanism: What ``objective`` trains a run with, in words (``None``: read from it,
            ``selection_charge.training_mechanism``).
        **k_distribution: The selection's ``distribution``, ``tnb_eta``, ``binomial_rounds`` (``training_method``).

    Returns:
        The ``TrainingChoice``.
    """
    from botorch_dp.methods.selection_charge import training_mechanism  # scipy, Opacus: late

    kw = dict(
        epsilon=epsilon, delta=delta, protect=protect, proxy_data=proxy_data, mean_trials=mean_trials,
        max_trials=max_trials, loss_clip=loss_clip, num_configurations=num_configurations, untuned=untuned,
        accounting=accounting, tuning_share=tuning_share, **k_distribution,
        mechanism=training_mechanism(objective) if mechanism is None else mechanism,
    )  # fmt: skip
    names = TUNING_METHODS if methods is None else tuple(methods)
    if not names or isinstance(methods, str) or not set(names) <= set(TUNING_METHODS) or len(set(names)) < len(names):
        raise ValueError(f"plan_options['methods'] must name distinct methods of {TUNING_METHODS}, got {methods!r}.")
    candidates = [training_method(name, space, **kw) for name in (*names, "untuned")]
    proxy = TrainingProxy(objective, proxy_data, ProxySplit(seed))
    proxy.split.halves(proxy.num_proxy_users)  # refuses a proxy too small to split, before anything trains
    seeds = [seed + j for j in range(int(num_repeats))]
    scores = []
    bar = progress_bar(total=len(candidates) * len(seeds), disable=not progress, desc="choosing the method", unit="run")
    try:
        for method in candidates:
            progress_stage(method=method.name)
            start = time.perf_counter()
            try:
                losses = []
                for s in seeds:
                    losses.append(method.simulate_training(proxy, s))
                    bar.update(1)
            except MethodUnavailable as err:
                scores.append(MethodScore(method.name, None, (), str(err)))
                continue
            seconds = time.perf_counter() - start
            scores.append(MethodScore(method.name, method, tuple(losses), None, seconds, method.private_trainings))
    finally:
        bar.close()
    tuning = scores[:-1]  # the untuned run is listed, never recommended
    if all(s.method is None for s in tuning):
        raise ValueError("proxy: no training method can be simulated: " + "; ".join(str(s.unavailable) for s in tuning))
    best, note = recommend(tuning)  # the cost column: private DP-SGD trainings
    note = None if note is None else note.replace("evaluations per run", "private training(s)")
    tuned = MethodComparison(scores, best, context, note)
    ran_untuned = untuned_wins(tuned)  # tuning is not expected to beat one untuned run: auto runs that run
    comparison = MethodComparison(scores, len(scores) - 1, context, note) if ran_untuned else tuned
    return TrainingChoice(comparison.recommended, comparison, untuned_advice(tuned, ran_untuned=ran_untuned))


def untuned_wins(comparison: MethodComparison) -> bool:
    r"""Whether tuning is not expected to beat one untuned run: the recommended tuning method's mean proxy loss
    is not below the untuned run's (the last score) by more than one paired standard error (with one repeat: not
    below it at all). ``"auto"`` then runs the untuned training."""
    untuned = comparison.scores[-1]
    if untuned.method is None or untuned.name != "untuned" or comparison.best == len(comparison.scores) - 1:
        return False
    _, diff, se = comparison.paired(len(comparison.scores) - 1)  # untuned minus the recommended tuning method
    return diff <= (se if math.isfinite(se) else 0.0)


def untuned_advice(comparison: MethodComparison, ran_untuned: bool = False) -> str | None:
    r"""The advice when the recommended tuning method does not beat the untuned run (the last score) by more
    than one paired standard error (with one repeat: by anything), else ``None``; with ``ran_untuned``
    (``untuned_wins`` held and auto ran the untuned training instead), the statement that it did."""
    untuned, chosen = comparison.scores[-1], comparison.scores[comparison.best]
    if untuned.method is None or untuned.name != "untuned" or chosen is untuned:
        return None
    wins, diff, se = comparison.paired(len(comparison.scores) - 1)  # diff: untuned minus chosen
    if diff > (se if math.isfinite(se) else 0.0) and not ran_untuned:
        return None
    r = len(chosen.proxy_losses)
    defaults = untuned.method.natural() if isinstance(untuned.method, UntunedMethod) else "the defaults"
    scored = (
        f"on the proxy one DP-SGD training at the public defaults at the whole epsilon scored "
        f"{untuned.mean_proxy_loss:.4g} and the recommended tuning method, {chosen.name}, {chosen.mean_proxy_loss:.4g} "
        f"(untuned minus {chosen.name} {diff:+.3g} +- {_text(se)} over {r} paired repeats, {chosen.name} lower in "
        f"{wins}/{r}: not lower by more than one paired standard error)"
    )
    if ran_untuned:
        return (
            f"tuning is not expected to beat one untuned run: {scored}; method='auto' therefore ran the untuned "
            f"training once at {defaults} (method='untuned'); force a tuning method with "
            "method='training_selection', 'subsample_tuning' or 'proxy_then_train'"
        )
    return (
        f"tuning is not expected to beat one untuned run: {scored}; tune ran {chosen.name} as asked; "
        f"method='untuned' trains once at {defaults} instead"
    )


def _text(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2g}"
