import os
from pathlib import Path

# The pins (tests/test_option_pins.py, tests/test_regression_pins.py; policy in tests/pin_compare.py)
# hold within 1e-9 only on one code path of each linear-algebra library: the L-BFGS-B batch search
# turns a last-bit difference into another path. numpy's and scipy's OpenBLAS choose kernels by CPU
# (an AVX-512 machine picks "SkylakeX", rounding differently from the "Haswell"/"Zen" ones the
# pins were written with), and torch's MKL chooses among AVX-512, AVX2 and SSE4.2 code paths (by
# CPU and MKL_ENABLE_INSTRUCTIONS) unless its conditional numerical reproducibility fixes one:
# MKL_CBWR=COMPATIBLE gives the same bits on every x86-64 CPU. Both are fixed before numpy and
# torch load (a caller's own setting wins, and the pins then fail saying why).
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_configure(config):
    # Tests that need reproducible noise pass a seed explicitly (issue 13); the warning itself
    # is tested with pytest.warns in tests/optim/test_inputs.py and tests/privacy. Added here
    # rather than in setup.cfg, where naming the category would import botorch_dp (and numpy)
    # before the OpenBLAS setting above.
    config.addinivalue_line("filterwarnings", "ignore:A noise seed was given:botorch_dp.privacy.seeding.PrivacyWarning")


#: ``make test-fast`` runs ``pytest -m "not slow"`` (about 2 min on 2 quiet cores, 2026-11-29); ``make test`` (CI) runs
#: everything. Marked slow: every test under these paths (empirical audits, notebooks, scripts,
#: Dask, subprocesses and process pools), every test using one of these fixtures (a PostgreSQL
#: server, a Dask cluster), and the functions listed in tests/slow_tests.txt (measured;
#: ``scripts/update_slow_tests.py`` rewrites it from a ``--durations=0`` run). A test marked
#: ``privacy_fast`` (the fast version of a privacy-critical property, issue 40 item 6) is never
#: marked slow, and the update script never lists it.
SLOW_PATHS = (
    "tests/audit/",
    "tests/tutorials/",
    "tests/scripts/",
    "tests/distributed/",
    "tests/benchmarks/test_cli.py",
    "tests/benchmarks/test_jobs.py",
    "tests/test_imports_lazy.py",
    "tests/test_makefile.py",
    "tests/tuning/test_training_charges.py",
    "tests/test_pins_under_mkl.py",
)
SLOW_FIXTURES = frozenset({"postgres_url", "dask_client"})
SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def slow_functions() -> frozenset[str]:
    r"""The ``file::function`` ids listed in ``tests/slow_tests.txt`` (comments dropped)."""
    lines = (line.split("#")[0].strip() for line in SLOW_LIST.read_text().splitlines())
    return frozenset(line for line in lines if line)


def _uses_a_slow_service(item) -> bool:
    r"""A fixture of ``SLOW_FIXTURES``, or a parameter ``"postgresql"`` (a fixture parametrized over
    storage back ends asks for the server with ``request.getfixturevalue``)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return bool(SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))) or any(
        isinstance(v, str) and v == "postgresql" for v in params.values()
    )


def pytest_collection_modifyitems(config, items):
    listed = slow_functions()
    for item in items:
        node = item.nodeid.split("[")[0]
        if item.get_closest_marker("privacy_fast") is not None:
            continue  # a fast version of a privacy property: always in make test-fast, whatever its time
        if node.startswith(SLOW_PATHS) or node in listed or _uses_a_slow_service(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=[torch.float32, torch.float64], ids=["float32", "float64"])
def dtype(request):
    return request.param


def _toy_rows(generator: torch.Generator, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    X = torch.randn(m, 3, generator=generator, dtype=torch.float64)
    return X, (X[:, 0] + 0.3 * X[:, 1] > 0).long()


@pytest.fixture(scope="session")
def toy_rows():
    r"""``rows(generator, m)``: ``m`` toy classification rows, float64 ``m x 3`` features and the labels
    ``x₀ + 0.3 x₁ > 0`` (the charged-training tests of tests/objectives and tests/tuning train on them)."""
    return _toy_rows
