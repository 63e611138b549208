r"""The quick run of the ``mlp`` experiment, made once per test session.

The experiment's tests are split like its modules (the experiment, its report), and they all
read the same quick run: ``mlp_quick`` runs the jobs and writes the report once, and each test
module exposes it as ``quick``.
"""

import pytest

from botorch_dp.benchmarks import mlp
from botorch_dp.benchmarks.jobs import run_jobs


@pytest.fixture(scope="session")
def mlp_quick(tmp_path_factory):
    settings = mlp.quick_settings()
    context = mlp.prepare(settings)
    jobs = mlp.experiment_jobs(settings, context)
    runs = run_jobs(jobs, mlp.make_runner(settings, context), workers=1, progress=False)
    out = tmp_path_factory.mktemp("mlp")
    path = mlp.write_report(settings, context, runs, out, "python -m botorch_dp.benchmarks run mlp --quick")
    return {"settings": settings, "context": context, "jobs": jobs, "runs": runs, "path": path}

