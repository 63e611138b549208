r"""``python -m botorch_dp.benchmarks``: see ``botorch_dp.benchmarks.cli``."""

from botorch_dp.benchmarks.cli import main

if __name__ == "__main__":
    main()
