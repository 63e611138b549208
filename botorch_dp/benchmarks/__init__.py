r"""The paper-reproduction harness (``scripts/reproduce_paper.py``), importable and testable.

- ``runs``: the ``Run`` record and the helpers that summarise runs;
- ``jobs``: the job DAG and ``run_jobs`` over any ``concurrent.futures.Executor``;
- ``paper``: ``Settings``, the pilot, ``Runner`` and the jobs of experiments E.1–E.5;
- ``report``: ``results.md`` (one ``table`` helper for every table) and findings;
- ``plots``: the PNG plots;
- ``outputs``: ``runs.json``, and running, re-rendering and merging output directories.

Every loss these modules record is a NON-PRIVATE diagnostic, computed only to evaluate
the methods.
"""
