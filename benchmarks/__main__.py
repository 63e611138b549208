r"""``python -m benchmarks``: see ``benchmarks.cli``."""

from benchmarks.cli import main

if __name__ == "__main__":
    main()
