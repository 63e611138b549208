r"""The quality benchmarks: one CLI (``python -m benchmarks``) over registered experiments.

A top-level package of the repository, not installed with ``botorch_dp`` (which never imports
it): run it from the repository root, ``python -m benchmarks ...``, where the root is first on
``sys.path`` (``scripts/`` put it there themselves; under pytest ``tests/`` is a package, so
the root is on the path). Elsewhere the name ``benchmarks`` is not this package (opacus, for
one, installs an unrelated top-level ``benchmarks``). Workers of a remote Dask cluster need
the repository on their ``PYTHONPATH`` too; local process pools and ``--dask local`` inherit it.

- ``cli``: the command (``list``, ``settings``, ``run NAME``), ``--set``, executors, resume;
- ``experiment``: the contract of an experiment module and the registry;
- ``store``: ``RunStore``, the fsynced JSON-lines record of finished jobs that makes runs resumable;
- ``paper_experiment``: the paper's experiments as the ``paper`` experiment;

- ``runs``: the ``Run`` record and the helpers that summarise runs;
- ``jobs``: the job DAG and ``run_jobs`` over any ``concurrent.futures.Executor``;
- ``paper``: ``Settings`` and the pilot of experiments E.1–E.5; ``paper_runner``: their ``Runner``;
  ``paper_jobs``: their jobs;
- ``report``: ``results.md``, from ``report_settings``, ``report_gp`` and ``report_small`` (its
  sections and findings) with the tables of ``report_tables`` (one ``table`` helper for every table);
- ``plots``: the PNG plots;
- ``outputs``: ``runs.json``, and running, re-rendering and merging output directories.

Every loss these modules record is a NON-PRIVATE diagnostic, computed only to evaluate
the methods.
"""
