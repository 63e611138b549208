r"""What ``tune(method="auto")`` costs against the chosen method's private run alone (issue 43 item 2).

Two tasks: the wine MLP (a torch MLP on sklearn wine, a mixed space of learning rate, integer width,
categorical activation and dropout, ε = 3; the proxy is the same objective on public synthetic data of
the wine's shape, ``synthetic_like``) and a logistic task at d = 10 (10 weights of a logistic model;
per-user logistic losses of 1000 users; the proxy 400 other users of the same distribution; ``logistic30``:
the same at d = 30). Per task
and seed, one ``tune(method="auto")`` with the default ``plan_budget="auto"`` is timed in phases: the
planning (everything before the private run, and any per-configuration planning inside it) and the
private run (``OnSpace.run_private`` less the planning inside it).

Two arms in the same process, paired by seed (their order alternates with the seed): ``new``, the
library as it is, and ``old``, the previous default budget (the private run's estimated time, no kernel-fit
cuts: ``plan.budget`` patched in place). Both are compared on the time and on the released result: the
logistic task's NON-PRIVATE population loss at the released weights (50,000 fresh users of the task's
distribution; for this report only) and, on both tasks, whether the two arms released the same
hyperparameters. The private noise is seeded (``seed=`` of ``tune``, 1000 + the task's seed, the same in both
arms) so that the arms are paired in it too; that seed's own ``PrivacyWarning`` ("A noise seed was given") is
the measurement's choice and is left out of the warnings, which are otherwise counted and listed.

Before any timed call one untimed ``tune(method="dp_gibo")`` without a proxy (the logistic task, seed 99)
warms the process up: the first call of a process pays one-time imports (``torch._dynamo`` on the first
torch optimizer, sympy through gpytorch's first kernel) and first-call costs that any call pays, the
private run alone included; its time is reported. Writes ``reports/auto-cost.md`` and
``reports/auto-cost.json``.

    OMP_NUM_THREADS=1 nice -n 5 python scripts/measure_auto_cost.py --seeds 3
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

import botorch_dp.plan.budget as plan_budgets
import botorch_dp.tuning.method_runs as method_runs
import botorch_dp.tuning.one_call as one_call
from botorch_dp.objectives.datasets import load_sklearn_classification, synthetic_like
from botorch_dp.plan.cache import ProxyCache
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace, TorchModelTuningObjective, tune

REPORT = Path(__file__).resolve().parent.parent / "reports"
TARGET = 2.0  # issue 43 item 2: method="auto" at most 2x the chosen private run

_clock = {"private": 0.0}
NOISE_SEED = 1000  # the private noise's seed, 1000 + the task's seed in both arms (paired)
TIE = 1e-6  # test losses this close count as equal (the same release up to rounding)
SEED_SAID = "A noise seed was given"  # privacy.seeding's PrivacyWarning for it


def wine_task(seed: int):
    data = load_sklearn_classification("wine", seed=0)
    space = SearchSpace(
        [
            Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
            Integer("width", 8, 64),
            Categorical("activation", ["relu", "tanh", "sigmoid"]),
            Hyperparameter("dropout", 0.0, 0.5),
        ]
    )
    acts = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}

    def net(width, activation, dropout):
        return torch.nn.Sequential(
            torch.nn.Linear(13, width), acts[activation](), torch.nn.Dropout(dropout), torch.nn.Linear(width, 3)
        )

    objective = TorchModelTuningObjective(data, space, model_fn=net, optimizer=torch.optim.Adam)
    proxy = objective.with_data(synthetic_like(data, seed=seed))
    return objective, space, proxy, objective.num_users


def _logistic_users(seed: int, d: int):
    g = torch.Generator().manual_seed(1000 + seed)
    w_true = torch.randn(d, generator=g, dtype=torch.float64) / d**0.5

    def users(m: int, generator: torch.Generator = g):
        x = torch.randn(m, d, generator=generator, dtype=torch.float64)
        p = torch.sigmoid(x @ w_true * 3)
        y = torch.where(torch.rand(m, generator=generator, dtype=torch.float64) < p, 1.0, -1.0)
        return x, y

    return users


def logistic_task(seed: int, d: int = 10, n: int = 1000, n_p: int = 400):
    users = _logistic_users(seed, d)
    names = [f"w{i}" for i in range(d)]
    space = SearchSpace([Hyperparameter(name, -2.0, 2.0) for name in names])

    def make(x, y):
        def objective(configs):
            w = torch.tensor([[c[name] for name in names] for c in configs], dtype=torch.float64)
            return torch.nn.functional.softplus(-(w @ x.T) * y)  # q x users logistic losses

        return objective

    return make(*users(n)), space, make(*users(n_p)), n


def logistic_test_loss(seed: int, hyperparameters: dict, d: int = 10, m: int = 50_000) -> float:
    r"""The NON-PRIVATE population loss at the released weights: the mean logistic loss of ``m`` fresh users
    of the task's distribution (a generator of their own, so the task's users are not redrawn)."""
    x, y = _logistic_users(seed, d)(m, torch.Generator().manual_seed(77))
    w = torch.tensor([hyperparameters[f"w{i}"] for i in range(d)], dtype=torch.float64)
    return float(torch.nn.functional.softplus(-(x @ w) * y).mean())


class _Recorded(ProxyCache):
    r"""``tune``'s memo of the proxy, kept for its counts."""

    last: ProxyCache | None = None

    def __init__(self) -> None:
        super().__init__()
        _Recorded.last = self


@contextmanager
def old_budget() -> Iterator[None]:
    r"""The previous default in place: ``plan_budget="auto"`` = the private run's estimated time, and the planning
    cut no further than the method comparison (no kernel-fit cuts)."""
    share, auto, cut = plan_budgets.AUTO_SHARE, plan_budgets.auto_budget, one_call.budgeted_options

    def uncut(*args, **kwargs):
        return cut(*args, **{**kwargs, "fit_cuts": False})

    plan_budgets.AUTO_SHARE = 1.0
    plan_budgets.auto_budget = lambda estimate: estimate.private_run()
    one_call.budgeted_options = uncut
    try:
        yield
    finally:
        plan_budgets.AUTO_SHARE, plan_budgets.auto_budget, one_call.budgeted_options = share, auto, cut


def _dim(task: str) -> int:
    r"""The logistic task's ``d``: ``"logistic"`` is ``d = 10``, ``"logistic30"`` ``d = 30``."""
    return int(task.removeprefix("logistic") or 10)


def measure(task: str, seed: int, plan_budget: str | None = "auto", arm: str = "new") -> dict:
    objective, space, proxy, n = wine_task(seed) if task == "wine" else logistic_task(seed, d=_dim(task))
    _clock.update(private=0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        if arm == "old":
            with old_budget():
                result = tune(
                    objective, space, epsilon=3.0, delta=1e-5, proxy=proxy, num_users=n, progress=False,
                    plan_budget=plan_budget, seed=NOISE_SEED + seed,
                )  # fmt: skip
        else:
            result = tune(
                objective, space, epsilon=3.0, delta=1e-5, proxy=proxy, num_users=n, progress=False,
                plan_budget=plan_budget, seed=NOISE_SEED + seed,
            )  # fmt: skip
        total = time.perf_counter() - start
    private = _clock["private"]
    planning = total - private
    cache = _Recorded.last
    assert cache is not None  # tune planned through one
    # the interpreter's ResourceWarnings and the measurement's own noise seed are not tune's choices
    own = [w for w in caught if not issubclass(w.category, ResourceWarning) and SEED_SAID not in str(w.message)]
    return {
        "task": task,
        "seed": seed,
        "arm": arm,
        "plan_budget": plan_budget,
        "proxy_points_asked": cache.rows_asked,
        "proxy_points_evaluated": cache.rows_evaluated,
        "method": result.method,
        "total_s": total,
        "planning_s": planning,
        "private_s": private,
        "ratio": total / private,
        "planning": result.planning,
        "hyperparameters": result.hyperparameters,
        "test_loss": None if task == "wine" else logistic_test_loss(seed, result.hyperparameters, d=_dim(task)),
        "warnings": [f"{w.category.__name__}: {str(w.message)[:160]}" for w in own],
    }


def warm_up() -> float:
    r"""One untimed ``tune(method="dp_gibo")`` without a proxy: the process's one-time imports and first-call costs."""
    objective, space, _, n = logistic_task(99)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune(objective, space, epsilon=3.0, delta=1e-5, method="dp_gibo", num_users=n, progress=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=["logistic", "wine"], help="wine, logistic (d = 10), logistic30")
    parser.add_argument("--logistic-seeds", type=int, default=None, help="seeds of the logistic task (default --seeds)")
    parser.add_argument("--unlimited", nargs="*", default=[], help="tasks also run once with plan_budget=None (seed 0)")
    args = parser.parse_args()
    # the private run timed alone: OnSpace.run_private, less any planning made inside it (planned lazily)
    plan_inside = {"value": 0.0}
    original_plan = method_runs.plan_private_run
    original_run = method_runs.OnSpace.run_private
    in_private = {"flag": False}

    def plan(*a, **k):
        start = time.perf_counter()
        try:
            return original_plan(*a, **k)
        finally:
            if in_private["flag"]:
                plan_inside["value"] += time.perf_counter() - start

    def run(self, *a, **k):
        in_private["flag"] = True
        start = time.perf_counter()
        try:
            return original_run(self, *a, **k)
        finally:
            in_private["flag"] = False
            _clock["private"] += time.perf_counter() - start - plan_inside["value"]
            plan_inside["value"] = 0.0

    method_runs.plan_private_run = plan
    method_runs.OnSpace.run_private = run  # type: ignore[method-assign]  # timed in place
    one_call.ProxyCache = _Recorded  # type: ignore[misc]  # counted in place
    warm = warm_up()
    print(f"warm-up {warm:.2f} s", flush=True)
    rows = []
    for task in args.tasks:
        seeds = args.logistic_seeds if task == "logistic" and args.logistic_seeds is not None else args.seeds
        for seed in range(seeds):
            arms = ("old", "new") if seed % 2 == 0 else ("new", "old")
            pair = {arm: measure(task, seed, arm=arm) for arm in arms}
            for arm in ("new", "old"):
                print(json.dumps({k: v for k, v in pair[arm].items() if k != "planning"}), flush=True)
                rows.append(pair[arm])
    for task in args.unlimited:
        row = measure(task, 0, None)
        print(json.dumps(row), flush=True)
        rows.append(row)
    write(rows, " ".join(sys.argv[1:]), warm)


def _paired(rows: list[dict]) -> list[tuple[dict, dict | None]]:
    r"""``(new, old)`` per task and seed, in order (``old`` is ``None`` for a row measured alone)."""
    olds = {(r["task"], r["seed"], r["plan_budget"]): r for r in rows if r.get("arm") == "old"}
    return [(r, olds.get((r["task"], r["seed"], r["plan_budget"]))) for r in rows if r.get("arm", "new") == "new"]


def _loss(row: dict | None) -> str:
    return "n/a" if row is None or row.get("test_loss") is None else f"{row['test_loss']:.4f}"


def write(rows: list[dict], argv: str, warm_up_s: float | None = None) -> None:
    (REPORT / "auto-cost.json").write_text(json.dumps(rows, indent=1) + "\n")
    threads = torch.get_num_threads()
    pairs = _paired(rows)
    lines = [
        '# What `tune(method="auto")` costs against the chosen private run (issue 43 item 2)',
        "",
        f"Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} nice -n 5 python "
        f"scripts/measure_auto_cost.py {argv}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores shared with other jobs, torch threads {threads}, "
        f"Python {platform.python_version()}, torch {torch.__version__}  ",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f'Target: the whole `tune(method="auto")` call at most {TARGET:g}x the chosen method\'s private run, with '
        'the default `plan_budget="auto"`. Arms in the same process, paired by seed: **new** (this library) and '
        "**old** (the previous default: the budget at the private run's estimated time, no kernel-fit cuts). "
        "Test loss: the logistic task's NON-PRIVATE population loss at the released weights (50,000 fresh users).",
        "",
    ]
    if warm_up_s is not None:
        lines += [
            f'Process warm-up before the timed calls (one untimed `tune(method="dp_gibo")` without a proxy: '
            f"one-time imports and first-call costs, which any first call pays, the private run alone included): "
            f"{warm_up_s:.1f} s.",
            "",
        ]
    lines += [
        "| task | seed | chosen | planning (s) | private run (s) | total / private | met | old: total / private | "
        "old: met | test loss new / old | same release | warnings | proxy points asked / evaluated |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for new, old in pairs:
        met = "yes" if new["ratio"] <= TARGET else "no"
        old_ratio = "n/a" if old is None else f"{old['ratio']:.2f}x"
        old_met = "n/a" if old is None else ("yes" if old["ratio"] <= TARGET else "no")
        same = "n/a" if old is None else ("yes" if old.get("hyperparameters") == new.get("hyperparameters") else "no")
        lines.append(
            f"| {new['task']} | {new['seed']} | {new['method']} | {new['planning_s']:.2f} | {new['private_s']:.2f} | "
            f"{new['ratio']:.2f}x | {met} | {old_ratio} | {old_met} | {_loss(new)} / {_loss(old)} | {same} | "
            f"{len(new.get('warnings', []))} | {new['proxy_points_asked']} / {new['proxy_points_evaluated']} |"
        )
    met_new = sum(new["ratio"] <= TARGET for new, _ in pairs)
    with_old = [(new, old) for new, old in pairs if old is not None]
    met_old = sum(old["ratio"] <= TARGET for _, old in with_old)
    lines += ["", f"Target met: new {met_new} of {len(pairs)}, old {met_old} of {len(with_old)}.", ""]
    for task in dict.fromkeys(new["task"] for new, _ in with_old if new.get("test_loss") is not None):
        diffs = [new["test_loss"] - old["test_loss"] for new, old in with_old if new["task"] == task]
        mean = sum(diffs) / len(diffs)
        se = (sum((x - mean) ** 2 for x in diffs) / max(len(diffs) - 1, 1) / len(diffs)) ** 0.5
        lines += [
            f"Test loss, new minus old (paired, {task}): {mean:+.4f} +- {se:.4f} (standard error); new better on "
            f"{sum(x < -TIE for x in diffs)}, worse on {sum(x > TIE for x in diffs)}, equal (within {TIE:g}) on "
            f"{sum(abs(x) <= TIE for x in diffs)} of {len(diffs)} seeds.",
            "",
        ]
    said = sorted({w for new, _ in pairs for w in new.get("warnings", [])})
    lines += ["Warnings inside the new arm's calls: " + ("none." if not said else "; ".join(said)), ""]
    lines += ["What the budget cut (`TuneResult.planning`):", ""]
    for new, old in pairs:
        lines.append(f"- {new['task']}, seed {new['seed']}, new: {new['planning']}")
        if old is not None:
            lines.append(f"- {old['task']}, seed {old['seed']}, old: {old['planning']}")
    (REPORT / "auto-cost.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
