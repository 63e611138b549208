r"""A ledger of the privacy spent by a tuning run, with an optional budget filter.

Validation data (the users whose losses drive the optimizer) is accounted with μ-GDP;
training data used by DP-SGD inside each evaluation is accounted separately with Opacus.
Opacus is imported only when training runs are accounted (``privacy.accountants``), so
importing the ledger and running DP-GIBO with it does not load Opacus.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Union

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.checks import (
    check_choice,
    check_delta,
    check_history_entry,
    check_positive,
)

__all__ = ["PrivacyBudgetExceeded", "PrivacyLedger"]

RunId = Union[int, str]
Run = tuple[float, float, int]
#: A validation release: (run id, release key), e.g. ("3f2a…", "step-0003").
ReleaseKey = tuple[str, str]
_TRAINING_ACCOUNTANTS = ("rdp", "prv")


class PrivacyBudgetExceeded(RuntimeError):
    r"""Raised before recording a step or run that would exceed the privacy budget."""


def _check_positive(value: float | None, name: str) -> float | None:
    return None if value is None else check_positive(value, name)


def _check_label(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValueError(f"{name} must be a non-empty string without surrounding spaces, got {value!r}.")
    return value


class PrivacyLedger:
    r"""Records the privacy spent on validation data and on training data.

    Validation data: every release computed from the validation users (a DP-GIBO
    gradient release, for instance) is recorded with its GDP parameter μ_j under a
    ``(run_id, key)`` pair: ``run_id`` names the run that made it (DP-GIBO uses its
    ``run_id``, a uuid4 hex) and ``key`` the release within the run (DP-GIBO uses
    ``"step-0003"``; a run with several releases per step can use ``"step-0003/grad"``,
    ``"step-0003/norm"``). The total over ALL runs is μ = sqrt(Σ_j μ_j²): runs that share
    a ledger compose (they read the same validation users), so two runs of μ = 0.6 give
    μ = 0.8485.

    Training data: when each evaluation trains a model with DP-SGD, each training run is
    recorded as (noise_multiplier, sample_rate, steps) under a ``run_id``, and all runs
    are composed with an Opacus accountant (``"rdp"`` or ``"prv"``). The training data
    is a different dataset, so its guarantee is reported separately.

    Recording is idempotent on ``(run_id, key)`` and on the training ``run_id`` with the
    same parameters: after resuming from a checkpoint, re-recording a release that is
    already in the ledger changes nothing (this needs the resumed run to keep its run
    id; under a new id a replayed release counts twice, which over-counts but never
    under-counts); a different μ (or different DP-SGD
    parameters) under a recorded id raises ``ValueError``. Whoever records must
    therefore use a fresh id for every new release or training run; an id is never
    "reused" silently at a different cost. With budgets set, ``record_*`` checks the
    budget first and raises ``PrivacyBudgetExceeded`` without recording anything when it
    would be exceeded; the filter runs over everything in the ledger, all runs together.
    A relative slack of ``BUDGET_RTOL`` absorbs floating-point rounding, so that T
    steps of μ/sqrt(T) fit a budget of μ.

    Example (25 DP-GIBO steps of μ/sqrt(25) with μ = 1; a 26th step is refused):

        ledger = PrivacyLedger(validation_mu_budget=1.0)
        for t in range(25):
            ledger.record_validation_step(mu=0.2, run_id="run-a", key=f"step-{t:04d}")
        ledger.validation_epsilon(1e-5)  # about 4.377
    """

    #: Version of ``state_dict``. 2: validation releases keyed by (run_id, key); version 1
    #: (keyed by step index only, so runs sharing a ledger were merged) is refused.
    STATE_VERSION = 2
    BUDGET_RTOL = 1e-9

    def __init__(
        self,
        *,
        validation_mu_budget: float | None = None,
        training_epsilon_budget: float | None = None,
        training_delta: float | None = None,
        training_accountant: str = "rdp",
        prv_eps_error: float = 0.01,
    ) -> None:
        r"""Create an empty ledger.

        Args:
            validation_mu_budget: Optional total GDP budget μ for the validation data.
            training_epsilon_budget: Optional ε budget for the training data; needs
                ``training_delta``.
            training_delta: δ at which training ε is measured (budget and report).
            training_accountant: Opacus accountant for training runs, ``"rdp"`` or
                ``"prv"``.
            prv_eps_error: Accuracy of the PRV accountant when it is used.
        """
        self.validation_mu_budget = _check_positive(validation_mu_budget, "validation_mu_budget")
        self.training_epsilon_budget = _check_positive(
            training_epsilon_budget, "training_epsilon_budget"
        )
        self.training_delta = (
            None if training_delta is None else check_delta(training_delta, "training_delta")
        )
        if self.training_epsilon_budget is not None and self.training_delta is None:
            raise ValueError("training_epsilon_budget needs training_delta.")
        self.training_accountant = check_choice(
            training_accountant, "training_accountant", _TRAINING_ACCOUNTANTS
        )
        self.prv_eps_error = _check_positive(prv_eps_error, "prv_eps_error")
        self._validation_steps: dict[ReleaseKey, float] = {}
        self._training_runs: dict[RunId, Run] = {}

    # ------------------------------------------------------------------ validation

    @property
    def validation_steps(self) -> dict[ReleaseKey, float]:
        r"""A copy of the recorded validation releases, {(run_id, key): μ_j}, in recording order."""
        return dict(self._validation_steps)

    def validation_run_ids(self) -> list[str]:
        r"""The run ids with at least one validation release, in order of first recording."""
        return list(dict.fromkeys(run_id for run_id, _ in self._validation_steps))

    def validation_mu(self, run_id: str | None = None) -> float:
        r"""Total GDP parameter of the validation data, sqrt(Σ_j μ_j²).

        Args:
            run_id: If given, only that run's releases (what the run spent on its own);
                default all runs in the ledger, which is what the validation users paid.

        Returns:
            μ ≥ 0 (0.0 with no releases, ``math.inf`` after a non-private one).
        """
        if run_id is None:
            return compose_gdp(self._validation_steps.values())
        return compose_gdp(mu for (rid, _), mu in self._validation_steps.items() if rid == run_id)

    def validation_epsilon(self, delta: float) -> float:
        r"""ε at ``delta`` of the validation data (exact GDP conversion).

        Args:
            delta: The target δ in (0, 1).

        Returns:
            ε ≥ 0 (0.0 with no steps).
        """
        return gdp_epsilon(self.validation_mu(), delta)

    def remaining_validation_mu(self) -> float:
        r"""The μ of the largest further step the validation budget allows.

        Returns:
            sqrt(budget² − spent²), clipped at 0; ``math.inf`` without a budget.
        """
        budget = self.validation_mu_budget
        if budget is None or math.isinf(budget):
            return math.inf
        spent = self.validation_mu()
        if math.isinf(spent):
            return 0.0
        return math.sqrt(max(budget * budget - spent * spent, 0.0))

    def check_validation_step(self, mu: float) -> None:
        r"""Raise if one more validation step of GDP parameter ``mu`` exceeds the budget.

        Args:
            mu: The step's GDP parameter μ_t > 0 (``math.inf`` for a non-private step).

        Returns:
            None; raises ``PrivacyBudgetExceeded`` if the step does not fit.
        """
        mu = check_positive(mu, "mu")
        budget = self.validation_mu_budget
        if budget is None or math.isinf(budget):
            return
        total = compose_gdp([self.validation_mu(), mu])
        if total > budget * (1.0 + self.BUDGET_RTOL):
            raise PrivacyBudgetExceeded(
                f"Validation privacy budget exceeded: a step with mu={mu:.6g} would bring "
                f"the total to mu={total:.6g}, above the budget mu={budget:.6g}. Spent "
                f"mu={self.validation_mu():.6g}; remaining mu budget "
                f"sqrt(budget^2 - spent^2) = {self.remaining_validation_mu():.6g}."
            )

    def record_validation_step(self, mu: float, *, run_id: str, key: str) -> bool:
        r"""Record a validation release, unless ``(run_id, key)`` is already recorded.

        Args:
            mu: The release's GDP parameter μ_j > 0 (``math.inf`` for a non-private one).
            run_id: Non-empty string naming the run (e.g. ``DPGIBO.run_id``, a uuid4 hex).
            key: Non-empty string naming the release within the run (e.g.
                ``"step-0003"``, ``"step-0003/grad"``).

        Returns:
            True if the release was recorded, False if it was already there with the same
            μ (a replay after resume). A different μ for a recorded ``(run_id, key)``
            raises ``ValueError``; a release over the budget raises
            ``PrivacyBudgetExceeded`` and records nothing.
        """
        mu = check_positive(mu, "mu")
        entry = (_check_label(run_id, "run_id"), _check_label(key, "key"))
        if entry in self._validation_steps:
            recorded = self._validation_steps[entry]
            if not (recorded == mu or math.isclose(recorded, mu, rel_tol=1e-9)):
                raise ValueError(
                    f"Validation release {key!r} of run {run_id!r} is already recorded with "
                    f"mu={recorded!r}, not mu={mu!r}."
                )
            return False
        self.check_validation_step(mu)
        self._validation_steps[entry] = mu
        return True

    # -------------------------------------------------------------------- training

    @property
    def training_runs(self) -> dict[RunId, Run]:
        r"""A copy of the recorded training runs, {run_id: (σ, q, steps)}."""
        return dict(self._training_runs)

    def training_history(self) -> list[Run]:
        r"""The training runs as an Opacus accountant history, in recording order.

        Returns:
            A list of (noise_multiplier, sample_rate, num_steps) tuples.
        """
        return list(self._training_runs.values())

    def _training_epsilon_of(self, history: list[Run], delta: float, accountant: str) -> float:
        check_choice(accountant, "accountant", _TRAINING_ACCOUNTANTS)
        if not history:
            return 0.0
        from botorch_dp.privacy.accountants import accountant_epsilon, make_accountant

        # composition is commutative: runs with equal (σ, q) become one entry with the
        # summed steps, which keeps the PRV accountant fast for many identical runs
        merged: dict[tuple[float, float], int] = {}
        for sigma, rate, steps in history:
            merged[(sigma, rate)] = merged.get((sigma, rate), 0) + steps
        history = [(sigma, rate, steps) for (sigma, rate), steps in merged.items()]
        return accountant_epsilon(
            make_accountant(accountant, history), delta=delta, eps_error=self.prv_eps_error
        )

    def training_epsilon(self, delta: float, accountant: str | None = None) -> float:
        r"""ε at ``delta`` of all training runs composed, from an Opacus accountant.

        Args:
            delta: The target δ in (0, 1).
            accountant: ``"rdp"`` or ``"prv"``; the ledger's ``training_accountant``
                if None.

        Returns:
            ε ≥ 0 (0.0 with no runs, ``math.inf`` if a run had no noise).
        """
        delta = check_delta(delta)
        accountant = self.training_accountant if accountant is None else accountant
        return self._training_epsilon_of(self.training_history(), delta, accountant)

    def check_training_run(
        self, *, noise_multiplier: float, sample_rate: float, steps: int
    ) -> None:
        r"""Raise if one more DP-SGD training run would exceed the training budget.

        Args:
            noise_multiplier: DP-SGD noise multiplier σ ≥ 0 of the run.
            sample_rate: Poisson sampling rate q in (0, 1].
            steps: Number of optimizer steps of the run.

        Returns:
            None; raises ``PrivacyBudgetExceeded`` if the run does not fit.
        """
        run = check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps")
        budget = self.training_epsilon_budget
        if budget is None or math.isinf(budget):
            return
        delta = self.training_delta
        total = self._training_epsilon_of(
            self.training_history() + [run], delta, self.training_accountant
        )
        if total > budget * (1.0 + self.BUDGET_RTOL):
            spent = self.training_epsilon(delta)
            raise PrivacyBudgetExceeded(
                f"Training privacy budget exceeded: a run with noise_multiplier={run[0]:.6g}, "
                f"sample_rate={run[1]:.6g}, steps={run[2]} would bring the training "
                f"epsilon ({self.training_accountant}, delta={delta:.3g}) to {total:.6g}, "
                f"above the budget {budget:.6g}. Spent so far: epsilon={spent:.6g} of "
                f"{budget:.6g}; epsilons do not compose additively, so what is left is "
                f"a run whose composition with the past stays within the budget."
            )

    def record_training_run(
        self, *, run_id: RunId, noise_multiplier: float, sample_rate: float, steps: int
    ) -> bool:
        r"""Record a DP-SGD training run, unless ``run_id`` is already recorded.

        Args:
            run_id: A string or integer identifying the run (JSON-serialisable).
            noise_multiplier: DP-SGD noise multiplier σ ≥ 0 (0 is non-private).
            sample_rate: Poisson sampling rate q in (0, 1].
            steps: Number of optimizer steps of the run.

        Returns:
            True if recorded, False if ``run_id`` was already there with the same
            parameters; different parameters for a recorded ``run_id`` raise
            ``ValueError``.
        """
        if isinstance(run_id, bool) or not isinstance(run_id, (int, str)):
            raise ValueError(f"run_id must be a str or an int, got {run_id!r}.")
        run = check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps")
        if run_id in self._training_runs:
            recorded = self._training_runs[run_id]
            same = recorded[2] == run[2] and all(
                math.isclose(a, b, rel_tol=1e-12) for a, b in zip(recorded[:2], run[:2])
            )
            if not same:
                raise ValueError(
                    f"Training run {run_id!r} is already recorded as {recorded!r}, not {run!r}."
                )
            return False
        self.check_training_run(noise_multiplier=run[0], sample_rate=run[1], steps=run[2])
        self._training_runs[run_id] = run
        return True

    # --------------------------------------------------------------------- reports

    def report(self, delta: float, *, training_delta: float | None = None) -> dict[str, Any]:
        r"""Both guarantees, side by side but never composed (different datasets).

        Args:
            delta: δ for the validation guarantee.
            training_delta: δ for the training guarantee; defaults to the ledger's
                ``training_delta``, then to ``delta``.

        Returns:
            ``{"validation": {...}, "training": {...}}`` with plain floats/ints/str:
            validation ``mu``, ``epsilon``, ``delta``, ``num_steps`` (releases, all runs),
            ``num_runs``, ``mu_budget``, ``remaining_mu``; training ``accountant``, ``epsilon``, ``delta``,
            ``num_runs``, ``epsilon_budget``.
        """
        delta = check_delta(delta)
        if training_delta is None:
            training_delta = self.training_delta if self.training_delta is not None else delta
        training_delta = check_delta(training_delta, "training_delta")
        return {
            "validation": {
                "mu": self.validation_mu(),
                "epsilon": self.validation_epsilon(delta),
                "delta": delta,
                "num_steps": len(self._validation_steps),
                "num_runs": len(self.validation_run_ids()),
                "mu_budget": self.validation_mu_budget,
                "remaining_mu": self.remaining_validation_mu(),
            },
            "training": {
                "accountant": self.training_accountant,
                "epsilon": self.training_epsilon(training_delta),
                "delta": training_delta,
                "num_runs": len(self._training_runs),
                "epsilon_budget": self.training_epsilon_budget,
            },
        }

    # ---------------------------------------------------------------- persistence

    def state_dict(self) -> dict[str, Any]:
        r"""The ledger's full state as plain values (``json.dumps``-able).

        Infinite μ is stored as ``float("inf")``, which Python's ``json`` writes as
        ``Infinity`` and reads back.

        Returns:
            A dict with the version, the budget settings, ``validation_steps`` as a list
            of ``{"run_id", "key", "mu"}`` dicts and ``training_runs`` as a list of dicts,
            both in recording order.
        """
        return {
            "version": self.STATE_VERSION,
            "validation_mu_budget": self.validation_mu_budget,
            "training_epsilon_budget": self.training_epsilon_budget,
            "training_delta": self.training_delta,
            "training_accountant": self.training_accountant,
            "prv_eps_error": self.prv_eps_error,
            "validation_steps": [
                {"run_id": run_id, "key": key, "mu": mu}
                for (run_id, key), mu in self._validation_steps.items()
            ],
            "training_runs": [
                {"run_id": run_id, "noise_multiplier": s, "sample_rate": q, "steps": n}
                for run_id, (s, q, n) in self._training_runs.items()
            ],
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        r"""Replace the ledger's state (settings and records) with a saved one.

        Args:
            state_dict: A mapping produced by ``state_dict`` (possibly via JSON).

        Returns:
            None. The budgets are not re-checked: a checkpoint records what was spent.
            A state of another version, or a damaged one, raises ``ValueError`` and
            leaves the ledger unchanged. Version 1 is refused rather than migrated: it
            keyed validation steps by step index only, so two runs that shared a ledger
            were stored as one, and a migration would carry that under-count over.
        """
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"A ledger state must be a mapping, got {type(state_dict).__name__}.")
        version = state_dict.get("version")
        if version == 1:
            raise ValueError(
                "Ledger state version 1 is not supported: it keyed validation steps by step "
                "index only, so runs that shared the ledger were counted as one and the total "
                "may be under-counted. Start a new ledger (version "
                f"{self.STATE_VERSION}), and add what the old one recorded by hand if needed."
            )
        if version != self.STATE_VERSION:
            raise ValueError(
                f"Unsupported ledger state version {version!r} (expected {self.STATE_VERSION})."
            )
        fresh = PrivacyLedger(
            validation_mu_budget=state_dict.get("validation_mu_budget"),
            training_epsilon_budget=state_dict.get("training_epsilon_budget"),
            training_delta=state_dict.get("training_delta"),
            training_accountant=state_dict.get("training_accountant", "rdp"),
            prv_eps_error=state_dict.get("prv_eps_error", 0.01),
        )
        steps: dict[ReleaseKey, float] = {}
        for entry in _entries(state_dict, "validation_steps", ("run_id", "key", "mu")):
            release = (_check_label(entry["run_id"], "run_id"), _check_label(entry["key"], "key"))
            if release in steps:
                raise ValueError(f"Repeated validation release {release!r}.")
            steps[release] = check_positive(entry["mu"], "mu")
        runs: dict[RunId, Run] = {}
        for entry in _entries(
            state_dict, "training_runs", ("run_id", "noise_multiplier", "sample_rate", "steps")
        ):
            run_id = entry["run_id"]
            if isinstance(run_id, bool) or not isinstance(run_id, (int, str)):
                raise ValueError(f"run_id must be a str or an int, got {run_id!r}.")
            if run_id in runs:
                raise ValueError(f"Repeated training run id {run_id!r}.")
            runs[run_id] = check_history_entry(
                entry["noise_multiplier"], entry["sample_rate"], entry["steps"], steps_name="steps"
            )
        fresh._validation_steps = steps
        fresh._training_runs = runs
        self.__dict__.update(fresh.__dict__)

    @classmethod
    def from_state_dict(cls, state_dict: Mapping[str, Any]) -> PrivacyLedger:
        r"""Build a ledger from a saved state.

        Args:
            state_dict: A mapping produced by ``state_dict`` (possibly via JSON).

        Returns:
            The restored ``PrivacyLedger``.
        """
        ledger = cls()
        ledger.load_state_dict(state_dict)
        return ledger


def _entries(state_dict: Mapping[str, Any], name: str, fields: tuple[str, ...]) -> list[Mapping[str, Any]]:
    entries = state_dict.get(name, [])
    if not isinstance(entries, list):
        raise ValueError(f"Ledger state: {name} must be a list, got {type(entries).__name__}.")
    for entry in entries:
        if not isinstance(entry, Mapping) or set(entry) != set(fields):
            raise ValueError(f"Ledger state: each entry of {name} must have exactly the keys {fields}, got {entry!r}.")
    return entries
