r"""The quick runs of the ``mlp``, ``dimension`` and ``mixed`` experiments, made once per test session.

Each experiment's tests are split like its modules (the experiment, its task, its report),
and they all read the same quick run: ``mlp_quick``, ``dimension_quick`` and ``mixed_quick`` run the jobs and
write the report once, and each test module exposes the one it reads as ``quick``.
"""

import warnings

import pytest

from benchmarks import dimension, mlp
from benchmarks.jobs import run_jobs


@pytest.fixture(scope="session")
def mlp_quick(tmp_path_factory):
    settings = mlp.quick_settings()
    context = mlp.prepare(settings)
    jobs = mlp.experiment_jobs(settings, context)
    runs = run_jobs(jobs, mlp.make_runner(settings, context), workers=1, progress=False)
    out = tmp_path_factory.mktemp("mlp")
    path = mlp.write_report(settings, context, runs, out, "python -m benchmarks run mlp --quick")
    return {"settings": settings, "context": context, "jobs": jobs, "runs": runs, "path": path}


@pytest.fixture(scope="session")
def dimension_quick(tmp_path_factory):
    s = dimension.quick_settings()
    context = dimension.prepare(s)
    jobs = dimension.experiment_jobs(s, context)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seeded runs' PrivacyWarning, optimiser warnings
        runs = run_jobs(jobs, dimension.make_runner(s, context), workers=1, progress=False)
    out = tmp_path_factory.mktemp("dimension")
    md = dimension.write_report(s, context, runs, out, "python -m benchmarks run dimension --quick")
    return dict(settings=s, context=context, jobs=jobs, runs=runs, md=md, out=out)


@pytest.fixture(scope="session")
def mixed_quick(tmp_path_factory):
    r"""The ``mixed`` quick settings through the CLI's ``run_experiment`` into a tmp run store."""
    from benchmarks import mixed
    from benchmarks.cli import run_experiment

    settings = mixed.quick_settings()
    out = tmp_path_factory.mktemp("mixed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seeded runs' PrivacyWarning, optimiser warnings
        result = run_experiment(
            "mixed", settings, out, progress=False, command="python -m benchmarks run mixed --quick", threads=1
        )
    return {
        "settings": settings,
        "context": result["context"],
        "runs": result["runs"],
        "out": out,
        "jobs": mixed.experiment_jobs(settings, result["context"]),
        "result": result,
    }
