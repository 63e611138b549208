r"""The quality benchmarks: one CLI (``python -m botorch_dp.benchmarks``) over registered experiments.

- ``cli``: the command (``list``, ``settings``, ``run NAME``), ``--set``, executors, resume;
- ``experiment``: the contract of an experiment module and the registry;
- ``store``: ``RunStore``, the fsynced JSON-lines record of finished jobs that makes runs resumable;
- ``paper_experiment``: the paper's experiments as the ``paper`` experiment;

- ``runs``: the ``Run`` record and the helpers that summarise runs;
- ``jobs``: the job DAG and ``run_jobs`` over any ``concurrent.futures.Executor``;
- ``paper``: ``Settings``, the pilot, ``Runner`` and the jobs of experiments E.1–E.5;
- ``report``: ``results.md`` (one ``table`` helper for every table) and findings;
- ``plots``: the PNG plots;
- ``outputs``: ``runs.json``, and running, re-rendering and merging output directories.

Every loss these modules record is a NON-PRIVATE diagnostic, computed only to evaluate
the methods.
"""
