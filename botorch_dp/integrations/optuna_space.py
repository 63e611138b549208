r"""The search space of an Optuna objective, read from its ``trial.suggest_*`` calls without running its body.

``record_space(objective)`` calls ``objective`` with a ``RecordingTrial`` whose ``suggest_*``
methods record each distribution and return a placeholder. While it runs, a profile hook
(``sys.setprofile``) watches the FOLLOWED frames: the objective's own, and that of every Python
function a followed frame calls with the recording trial among its arguments (a helper such as
``build(trial)`` or ``Net(trial)``'s ``__init__``) or as a variable of an enclosing function (a
closure, a list comprehension over ``trial.suggest_int``), recursively. The first call made from a
followed frame to anything else, a Python function that does not receive the trial (event
``"call"``), a C function (``"c_call"``) or one of the trial's own other methods
(``train_dp_sgd``, ``report``), raises a private ``BaseException`` before the callee's first
instruction, so loading data, building a model or training never start. A trace hook
(``sys.settrace``) arms the profile hook again at each line of a followed frame after that, so
a ``finally:`` clause or an ``except BaseException:`` handler cannot call anything either.

What the recording sees, therefore: the ``suggest_*`` calls that come before any other call, in
the objective's body and in the helpers it passes the trial to. Their arguments must make no call
(``10**-4`` and ``2 * low`` do; ``math.log(...)`` is a call, which ends the recording before that
suggest: compute such a bound outside the objective). A suggest after another call (``lr`` after
``model = build(trial)`` when ``build`` constructs a ``nn.Module`` after its own suggests) is not
recorded; a ``RunTrial`` refuses it by name at run time, naming the call that ended the recording.
Conditional spaces (a suggest that depends on an earlier suggested value) are refused by name
before anything runs when the recordings differ: the objective is recorded with every placeholder
at the low end of its range (the first choice), at the high end (the last choice), and with each
middle choice of each categorical in turn; a suggest that differs between them is named. At run
time a ``RunTrial`` refuses, by name, a suggest for a name that was not recorded or with other
arguments than recorded (a condition none of the recordings met). What the profiler does not see
as a call runs: operators that call no Python function (arithmetic on numbers, a tensor's
C-implemented operators), attribute reads of C objects, and calls of types implemented in C
(``float(x)``, ``range(n)``); nothing they compute leaves the recording. The space is public:
its bounds must not be computed from private data.

``OptunaSpace`` maps the recorded distributions to the library's ``SearchSpace``:
``suggest_float(low, high, log=)`` → ``Hyperparameter(name, low, high, log_scale=)``,
``suggest_int(low, high, log=)`` → ``Integer``, ``suggest_categorical`` → ``Categorical``; a
``step=`` (float or int) becomes an ``Integer`` over the grid index ``k`` with value ``low + k·step``,
and a range with one value a ``Categorical`` with one choice.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from botorch_dp.tuning.search_space import Categorical, Hyperparameter, Integer, SearchSpace

__all__ = ["OptunaSpace", "RecordingTrial", "RunTrial", "record_space"]

#: How the refusals tell the user to write the objective.
SUGGEST_FIRST = (
    "put every trial.suggest_* call before any other call, in the objective's body or in a helper it calls "
    "with the trial (build(trial)); any other call ends the recording of the space (no data is loaded and "
    "nothing trains while it is read); the suggests' arguments must make no call; conditional spaces "
    "(suggest calls that depend on suggested values) are not supported"
)


class _StopRecording(BaseException):
    r"""Ends a recording at the objective's first call that is no ``suggest_*`` (a ``BaseException``, so
    that ``except Exception:`` in the objective does not catch it)."""


class _TrialMethods:
    r"""Optuna's ``Trial`` surface shared by the recording and the run trials (``_suggest`` differs)."""

    number: int = 0

    def _suggest(self, name: str, distribution: BaseDistribution) -> Any:
        raise NotImplementedError

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None, log: bool = False) -> Any:
        return self._suggest(name, FloatDistribution(low, high, log=log, step=step))

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> Any:
        return self._suggest(name, IntDistribution(low, high, log=log, step=step))

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self._suggest(name, CategoricalDistribution(choices))

    def suggest_uniform(self, name: str, low: float, high: float) -> Any:
        return self._suggest(name, FloatDistribution(low, high))

    def suggest_loguniform(self, name: str, low: float, high: float) -> Any:
        return self._suggest(name, FloatDistribution(low, high, log=True))

    def suggest_discrete_uniform(self, name: str, low: float, high: float, q: float) -> Any:
        return self._suggest(name, FloatDistribution(low, high, step=q))

    # what an Optuna objective may call besides the suggests: nothing it reports or attaches leaves the trial
    def report(self, value: float, step: int) -> None:
        r"""Ignored: intermediate values are sensitive and no pruner sees them."""

    def should_prune(self) -> bool:
        r"""Always ``False``: pruning would decide on un-noised intermediate losses."""
        return False

    def set_user_attr(self, key: str, value: Any) -> None:
        r"""Ignored: nothing an objective attaches to a trial is stored (it could be derived from the losses)."""

    @property
    def user_attrs(self) -> dict[str, Any]:
        return {}

    no_training = ""

    def train_dp_sgd(self, *args: Any, **kwargs: Any) -> Any:
        r"""Refused here: only a study with ``dp_sgd=`` and ``training_data=`` trains (and charges) DP-SGD runs."""
        raise ValueError(
            self.no_training
            or "trial.train_dp_sgd: this study has no DP-SGD training; create it with "
            "create_private_study(dp_sgd=DPSGDConfig(...), training_data=(X_train, y_train), num_users=n, ...)."
        )


_SUGGESTS = frozenset(
    getattr(_TrialMethods, name).__code__
    for name in (
        "suggest_float",
        "suggest_int",
        "suggest_categorical",
        "suggest_uniform",
        "suggest_loguniform",
        "suggest_discrete_uniform",
    )
)


def _placeholder(distribution: BaseDistribution, high: bool) -> Any:
    r"""A valid value of ``distribution``: its low end (first choice), or its high end (last choice)."""
    if isinstance(distribution, CategoricalDistribution):
        return distribution.choices[-1 if high else 0]
    assert isinstance(distribution, (FloatDistribution, IntDistribution))
    return distribution.high if high else distribution.low


class RecordingTrial(_TrialMethods):
    r"""Records each ``suggest_*`` call's distribution, in order, and returns a placeholder value.

    Args:
        high: Placeholders at the high end of each range (the last choice); else the low end (first).
        choices: ``{name: index}``: the categorical ``name`` returns its choice at ``index`` instead.
    """

    def __init__(self, high: bool = False, choices: dict[str, int] | None = None) -> None:
        self.high, self.choices = high, dict(choices or {})
        self.distributions: dict[str, BaseDistribution] = {}

    def __getattr__(self, name: str) -> Any:
        # an attribute Optuna's Trial has and this one lacks: called from the objective, the profile hook
        # stops the recording before this body runs (it is a call); from anywhere else, Python's error
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _suggest(self, name: str, distribution: BaseDistribution) -> Any:
        known = self.distributions.setdefault(name, distribution)
        if known != distribution:
            raise ValueError(f"trial.suggest_*({name!r}): suggested as {known} and again as {distribution}.")
        if isinstance(distribution, CategoricalDistribution) and name in self.choices:
            return distribution.choices[self.choices[name]]
        return _placeholder(distribution, self.high)


def _describe(callee: Any) -> str:
    if isinstance(callee, types.CodeType):
        return f"{callee.co_name}() ({callee.co_filename}:{callee.co_firstlineno})"
    return f"{getattr(callee, '__qualname__', None) or getattr(callee, '__name__', None) or type(callee).__name__}()"


def _codes(cls: type) -> frozenset[types.CodeType]:
    r"""The code objects of ``cls``'s own Python methods and property getters (its bases' below ``object`` too)."""
    codes = set()
    for klass in cls.__mro__[:-1]:
        for attribute in vars(klass).values():
            function = attribute.fget if isinstance(attribute, property) else attribute
            if isinstance(function, types.FunctionType):
                codes.add(function.__code__)
    return frozenset(codes)


#: A call to one of the recording trial's own methods is no helper (``self`` is the trial): other than a
#: ``suggest_*``, it ends the recording (``train_dp_sgd``, ``report``, an attribute it lacks).
_TRIAL_CODES = _codes(RecordingTrial)


def _receives(frame: types.FrameType, trial: Any) -> bool:
    r"""Whether the call that opened ``frame`` passed ``trial`` as one of its arguments (``*args``/``**kwargs`` too),
    or its function reads it from an enclosing function (a closure; a comprehension over the trial)."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    local = frame.f_locals
    for name in (*code.co_varnames[:count], *code.co_freevars):
        value = local.get(name)
        if value is trial:
            return True
        if isinstance(value, tuple) and any(v is trial for v in value):
            return True
        if isinstance(value, dict) and any(v is trial for v in value.values()):
            return True
    return False


class _Watch:
    r"""The hooks of one recording (this thread only): see the module docstring.

    The followed frames are the objective's own and those of the Python functions a followed frame
    calls with the recording trial as an argument (a helper such as ``build(trial)``), recursively.
    """

    def __init__(self, caller: types.FrameType, trial: RecordingTrial) -> None:
        self.caller, self.trial = caller, trial
        self.followed: set[types.FrameType] = set()
        self.stopped_at: str | None = None

    def _follows(self, frame: types.FrameType) -> bool:
        r"""Whether ``frame`` (just opened) is followed: the objective's, or a helper called with the trial."""
        if frame in self.followed:
            return True
        caller = frame.f_back
        objective = not self.followed and caller is self.caller
        helper = caller in self.followed and frame.f_code not in _TRIAL_CODES and _receives(frame, self.trial)
        if objective or helper:
            self.followed.add(frame)
        return objective or helper

    def _stop(self, callee: Any) -> None:
        if self.stopped_at is None:
            self.stopped_at = _describe(callee)
        raise _StopRecording

    def profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if not self._follows(frame) and frame.f_back in self.followed and frame.f_code not in _SUGGESTS:
                self._stop(frame.f_code)
        elif event == "c_call" and frame in self.followed:
            self._stop(arg)

    def trace(self, frame: types.FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        followed = self._follows(frame) if event == "call" else frame in self.followed
        if self.stopped_at is not None and sys.getprofile() is None:  # raising unset it: armed again
            sys.setprofile(self.profile)
        return self.trace if followed else None


def _record_once(
    objective: Callable[[Any], Any], high: bool, choices: dict[str, int] | None = None
) -> tuple[dict[str, BaseDistribution], str | None]:
    trial = RecordingTrial(high, choices)
    watch = _Watch(sys._getframe(), trial)
    old_profile, old_trace = sys.getprofile(), sys.gettrace()
    try:
        sys.settrace(watch.trace)
        sys.setprofile(watch.profile)
        objective(trial)
    except _StopRecording:
        pass
    except Exception as err:
        raise ValueError(
            f"objective raised {type(err).__name__} while its search space was read from its suggest "
            f"calls (before any other call; nothing was evaluated): {err}"
        ) from err
    finally:
        sys.setprofile(old_profile)
        sys.settrace(old_trace)
    return dict(trial.distributions), watch.stopped_at


def record_space(objective: Callable[[Any], Any]) -> OptunaSpace:
    r"""Read ``objective``'s search space from its ``suggest_*`` calls (see the module docstring).

    Args:
        objective: An Optuna objective, ``objective(trial)``.

    Returns:
        The ``OptunaSpace``.

    Raises:
        ValueError: Nothing recorded, a name the library cannot take, an unsupported distribution, or a
            space that differs between the low-end and high-end recordings (conditional).
    """
    if not callable(objective):
        raise ValueError(f"objective must be callable, objective(trial), got {type(objective).__name__}.")
    low, stopped_at = _record_once(objective, high=False)
    if not low:
        where = f" (the first call was {stopped_at})" if stopped_at else ""
        raise ValueError(f"objective: no trial.suggest_* call was recorded{where}; {SUGGEST_FIRST}.")
    recordings = {"every value at its low end (the first choice)": low}
    recordings["every value at its high end (the last choice)"] = _record_once(objective, high=True)[0]
    for name, d in low.items():  # each middle choice of a categorical, the others at their low end
        if isinstance(d, CategoricalDistribution):
            for index in range(1, len(d.choices) - 1):
                recordings[f"{name}={d.choices[index]!r}"] = _record_once(objective, False, {name: index})[0]
    _refuse_conditional(recordings)
    return OptunaSpace(low, stopped_at)


def _refuse_conditional(recordings: dict[str, dict[str, BaseDistribution]]) -> None:
    r"""Refuse, naming the hyperparameters, recordings that differ (a conditional space)."""
    first = next(iter(recordings.values()))
    if all(list(r.items()) == list(first.items()) for r in recordings.values()):
        return
    every = [name for r in recordings.values() for name in r]
    names = sorted({n for n in every if any(r.get(n) != first.get(n) for r in recordings.values())})
    if names:
        what = f"{names} depend on the values of other suggests (suggested for some values only, or differently)"
    else:
        what = "the suggest calls come in an order that depends on suggested values"
    seen = "; ".join(f"with {how}: {list(r)}" for how, r in recordings.items())
    raise ValueError(f"objective: a conditional space: {what} (recorded {seen}); {SUGGEST_FIRST}.")


def _grid(distribution: FloatDistribution | IntDistribution) -> tuple[float, int] | None:
    r"""``(step, k_max)`` of a distribution on a grid ``low + k·step`` (``None``: no step, or an int step 1)."""
    step = distribution.step
    if step is None or (isinstance(distribution, IntDistribution) and step == 1):
        return None
    return float(step), int(round((distribution.high - distribution.low) / step))


def _hyperparameter(name: str, d: BaseDistribution) -> Hyperparameter | Integer | Categorical:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(
            f"trial.suggest_*({name!r}): the private study passes hyperparameters by name, so a name must be "
            "a Python identifier (letters, digits, underscores)."
        )
    try:
        if isinstance(d, CategoricalDistribution):
            return Categorical(name, tuple(d.choices))
        if not isinstance(d, (FloatDistribution, IntDistribution)):
            raise ValueError(f"{type(d).__name__} is not supported")
        if d.single():
            return Categorical(name, (_placeholder(d, False),))
        grid = _grid(d)
        if grid is not None:
            return Integer(name, 0, grid[1])
        if isinstance(d, IntDistribution):
            return Integer(name, d.low, d.high, log_scale=d.log)
        return Hyperparameter(name, d.low, d.high, log_scale=d.log)
    except ValueError as err:
        raise ValueError(f"trial.suggest_*({name!r}) with {d}: {err}") from None


@dataclass(frozen=True)
class OptunaSpace:
    r"""The recorded distributions and the library's ``SearchSpace`` for them.

    Attributes:
        distributions: ``{name: optuna distribution}`` in the order suggested.
        stopped_at: The call that ended the recording (``None``: the objective returned).
    """

    distributions: dict[str, BaseDistribution]
    stopped_at: str | None = None

    @property
    def space(self) -> SearchSpace:
        r"""The library's ``SearchSpace`` (a grid's index ``k`` under the hyperparameter's name)."""
        return SearchSpace([_hyperparameter(name, d) for name, d in self.distributions.items()])

    def to_optuna(self, configuration: dict[str, Any]) -> dict[str, Any]:
        r"""A configuration of ``space`` (natural units) as Optuna values (a grid's index ``k`` → ``low + k·step``)."""
        out = {}
        for name, d in self.distributions.items():
            value = configuration[name]
            if isinstance(d, (FloatDistribution, IntDistribution)) and not d.single():
                grid = _grid(d)
                if grid is not None:
                    value = min(d.low + int(value) * grid[0], d.high)
                # clamped: 10 ** log10(high) may land a rounding error outside the range
                value = min(max(int(value), d.low), d.high) if isinstance(d, IntDistribution) else float(value)
                value = min(max(value, d.low), d.high)
            out[name] = value
        return out

    def refusal(self, name: str, distribution: BaseDistribution) -> str | None:
        r"""Why a run-time suggest of ``name`` with ``distribution`` is refused (``None``: it is the recorded one)."""
        known = self.distributions.get(name)
        if known == distribution:
            return None
        what = (
            f"the space read from the objective has no {name!r}"
            if known is None
            else f"{name!r} was recorded as {known}, not {distribution}"
        )
        ended = f" (the recording ended at the call {self.stopped_at})" if self.stopped_at else ""
        return f"trial.suggest_*({name!r}): {what}{ended}; {SUGGEST_FIRST}."


class RunTrial(_TrialMethods):
    r"""The trial an objective runs with: each ``suggest_*`` returns the configuration's value.

    Args:
        space: The recorded ``OptunaSpace``.
        params: ``{name: Optuna value}`` of the configuration.
        number: The trial's number (within this process's evaluations).
        no_training: Why ``train_dp_sgd`` is refused (a default message if empty).
    """

    def __init__(self, space: OptunaSpace, params: dict[str, Any], number: int = 0, no_training: str = "") -> None:
        self._space, self._values, self.number, self.no_training = space, dict(params), number, no_training
        self._suggested: dict[str, Any] = {}

    def _suggest(self, name: str, distribution: BaseDistribution) -> Any:
        refusal = self._space.refusal(name, distribution)
        if refusal is not None:
            raise ValueError(refusal)
        self._suggested[name] = self._values[name]
        return self._values[name]

    @property
    def params(self) -> dict[str, Any]:
        r"""The values suggested so far (public: the configuration's)."""
        return dict(self._suggested)

    @property
    def distributions(self) -> dict[str, BaseDistribution]:
        return {name: self._space.distributions[name] for name in self._suggested}
