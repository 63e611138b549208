r"""A private study's Optuna RDB storage (issue 44 item 4): what Optuna's own readers see.

The stored study is a valid Optuna study: ``optuna.load_study`` gives its ``best_trial`` and
``best_params``, ``trials_dataframe()`` and Optuna's plots (plotly and matplotlib) run on it and
optuna-dashboard's server shows its trials, also when the method released no score (the value is
then ``+inf``, which the slice plot leaves out). The storage holds the released trials and nothing
else: every table equals, row for row, what Optuna itself writes for a study built from ``tune``'s
released output alone through its public API (``create_trial``/``add_trial``), so no loss, no
losing trial of a selection and no number of trials can be in it; a raw scan of every table finds
no loss and no losing trial's value either.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sqlite3
import warnings
import wsgiref.util

import matplotlib
import optuna
import pytest
import torch

from .test_optuna import _losses, _optimize, _study, objective

matplotlib.use("Agg")


def _numbers_in(value):
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, str):
        try:
            return _numbers_in(json.loads(value))
        except ValueError:
            return [float(m) for m in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", value)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers_in(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers_in(v)]
    return []


def _tables(path):
    r"""Every table's rows (sorted), without the datetime columns (the time of the call) and the row ids (the
    order of insertion)."""
    with sqlite3.connect(path) as db:
        names = sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        out = {}
        for name in names:
            columns = [(row[1], row[5]) for row in db.execute(f"PRAGMA table_info({name})")]
            keep = [
                c
                for c, key in columns
                if not c.startswith("datetime")
                and not (key and c.endswith("_id") and name not in ("trials", "studies"))
            ]
            out[name] = sorted(db.execute(f"SELECT {', '.join(keep)} FROM {name}").fetchall(), key=repr)
    return out


def _written_by_optuna(study, path):
    r"""What Optuna writes, through its public API, for a study of what ``tune`` released alone: its runs'
    points and scores (``+inf`` for none) and its guarantee, method, ``ε`` and ``δ``, at ``path``."""
    result = study.result
    reference = optuna.create_study(storage=f"sqlite:///{path}", study_name=study.study_name)
    public = {
        "botorch_dp.guarantee": result.guarantee_report(),
        "botorch_dp.epsilon": result.guarantee.epsilon,
        "botorch_dp.delta": result.guarantee.delta,
        "botorch_dp.method": result.method,
    }
    for key, value in public.items():
        reference.set_user_attr(key, value)
    assert study.best_params == study.space.to_optuna(result.hyperparameters)
    for t, run in zip(study.trials, result.runs, strict=True):
        value = math.inf if run.noisy_score is None else run.noisy_score
        said = t.user_attrs["botorch_dp.value"]  # public text, which says whether a score was released
        assert said.startswith("none released") == (run.noisy_score is None) and not re.search(r"\d", said)
        reference.add_trial(
            optuna.trial.create_trial(
                params=t.params,
                distributions=dict(study.space.distributions),
                value=value,
                user_attrs={"botorch_dp.value": said},
            )
        )
    return _tables(path)


def _plots(loaded):
    r"""Optuna's plots of ``loaded`` (plotly and matplotlib), each run once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # matplotlib's are experimental; a single trial makes flat axes
        for module in (optuna.visualization, optuna.visualization.matplotlib):
            for name in ("plot_optimization_history", "plot_slice", "plot_parallel_coordinate", "plot_timeline"):
                getattr(module, name)(loaded)
        return optuna.visualization.plot_optimization_history(loaded)


def _dashboard(url):
    r"""The study as optuna-dashboard's server reads it from the storage (its JSON API, called through WSGI)."""
    import optuna_dashboard  # in dev (setup.cfg): its storage reader is what the dashboard shows

    app = optuna_dashboard.wsgi(url)

    def get(path):
        environ: dict = {}
        wsgiref.util.setup_testing_defaults(environ)
        environ["PATH_INFO"] = path
        status = []
        body = b"".join(app(environ, lambda s, headers, exc=None: status.append(s)))
        assert status == ["200 OK"], (path, status, body[:300])
        return json.loads(body)

    (summary,) = get("/api/studies")["study_summaries"]
    return get(f"/api/studies/{summary['study_id']}")


def _shown(detail):
    r"""The dashboard's trials: ``(params, values, user_attrs)`` each."""
    return [
        (
            {p["name"]: p["param_internal_value"] for p in t["params"]},
            [float(v) for v in t["values"]],
            {a["key"]: a["value"] for a in t["user_attrs"]},
        )
        for t in detail["trials"]
    ]


def test_a_study_without_a_released_score_is_a_valid_optuna_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _optimize(
        _study(storage=url, study_name="dp_gibo"),
        lambda trial: _losses(trial.suggest_float("lr", 1e-4, 1e-1, log=True), 32, "relu"),
    )
    assert study.result.method == "dp_gibo" and study.best_value is None  # DP-GIBO releases its point only
    loaded = optuna.load_study(study_name="dp_gibo", storage=url)
    assert loaded.best_params == study.best_params and loaded.best_trial.params == study.best_trial.params
    assert loaded.best_value == math.inf == study.best_trial.value
    assert loaded.best_trial.user_attrs["botorch_dp.value"].startswith("none released")
    frame = loaded.trials_dataframe()
    assert len(frame) == 1 and frame["value"].tolist() == [math.inf] and frame["state"].tolist() == ["COMPLETE"]
    assert list(_plots(loaded).data[0].y) == [math.inf]  # the history shows it at inf; the slice plot leaves it out
    assert study.trials_dataframe()["value"].tolist() == [math.inf]
    ((params, values, attrs),) = _shown(_dashboard(url))
    assert params == study.best_params and values == [math.inf] and attrs == study.best_trial.user_attrs


def test_optunas_readers_and_plots_show_the_released_scores(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _optimize(_study(storage=url, study_name="plotted"), objective)  # enumerate: a score per run
    loaded = optuna.load_study(study_name="plotted", storage=url)
    released = [r.noisy_score for r in study.result.runs]
    assert loaded.best_trial.number == study.result.chosen and loaded.best_value == study.best_value
    assert loaded.best_params == study.best_params and loaded.trials_dataframe()["value"].tolist() == released
    assert list(_plots(loaded).data[0].y) == released
    assert loaded.user_attrs["botorch_dp.guarantee"] == study.guarantee_report()
    detail = _dashboard(url)
    assert [(values, attrs) for _, values, attrs in _shown(detail)] == [
        ([v], t.user_attrs) for v, t in zip(released, study.trials, strict=True)
    ]
    assert [t["number"] for t in detail["best_trials"]] == [study.result.chosen]
    assert {a["key"]: a["value"] for a in detail["user_attrs"]}["botorch_dp.guarantee"] == study.guarantee_report()


@pytest.mark.privacy_fast
@pytest.mark.parametrize("method", ["private_random_search", "auto"])
def test_the_storage_is_the_released_trials_alone(tmp_path, method):
    produced: list[torch.Tensor] = []
    evaluated: list[float] = []

    def recording(trial):
        losses = objective(trial, produced)
        evaluated.append(trial.params["lr"])
        return losses

    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _optimize(_study(method=method, storage=url, study_name="private", seed=5), recording)
    released = [r.noisy_score for r in study.result.runs]
    assert len(study.trials) == (1 if method != "auto" else 2) < len(produced)
    if method != "auto":
        assert len(produced) >= 3  # K (hidden) trials ran: the seed gives a K the storage could show
    assert _tables(tmp_path / "study.db") == _written_by_optuna(study, tmp_path / "reference.db")
    # and a raw scan: no loss (per user or mean), no losing trial's hyperparameter value, in any table
    private = torch.cat([torch.cat(produced), torch.stack([p.mean() for p in produced])]).tolist()
    losing = [lr for lr in evaluated if lr not in [t.params["lr"] for t in study.trials]]
    with sqlite3.connect(tmp_path / "study.db") as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        stored = [x for t in tables for row in db.execute(f"SELECT * FROM {t}") for v in row for x in _numbers_in(v)]
        values = [row[0] for row in db.execute("SELECT value FROM trial_values")]
    assert sorted(values) == sorted(released) and stored and losing
    assert not [x for x in stored if any(math.isclose(x, p, rel_tol=1e-9, abs_tol=1e-12) for p in private if p)]
    assert not [x for x in stored if any(math.isclose(x, lr, rel_tol=1e-9) for lr in losing)]


@pytest.mark.privacy_fast
def test_the_stored_time_is_the_time_optimize_was_called(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _study(method="private_random_search", storage=url, study_name="timed")
    before = optuna.load_study(study_name="timed", storage=url)
    assert before.trials == []
    _optimize(study, functools.partial(objective))
    (trial,) = optuna.load_study(study_name="timed", storage=url).trials
    assert trial.datetime_start == trial.datetime_complete == study.trials[0].datetime_start
    assert trial.duration.total_seconds() == 0.0
