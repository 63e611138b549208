"""Import time (issue 33, item 4): ``import botorch_dp`` loads nothing heavy, and the public
names load only what they need; every public import path still works.

What keeps ``scripts/bench_import.py``'s ratio low is checked here without timing anything
(timings on CI are noisy): which modules a fresh interpreter holds after the import.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import botorch_dp

ROOT = Path(__file__).resolve().parents[1]

#: Optional or heavy dependencies that no public name of the package needs at import.
HEAVY = (
    "opacus",
    "dask",
    "distributed",
    "sklearn",
    "matplotlib",
    "dp_accounting",
    "safetensors",
    "psycopg",
    "pandas",
    "ax",
    "scipy.stats",
    "scipy.optimize",
    "scipy.integrate",
    "botorch.optim",
    "botorch.fit",
    "botorch.acquisition.input_constructors",
)

SUBPACKAGES = ("acquisition", "gradient_gp", "optim", "plan", "privacy", "distributed")


def _loaded_after(code: str) -> set[str]:
    r"""Run ``code`` in a fresh interpreter on this checkout; which modules does it hold then?"""
    probe = (
        "import sys, json\n" + code + "\n"
        "import botorch_dp\n"
        "print(json.dumps({'file': botorch_dp.__file__, 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["file"].startswith(str(ROOT)), out["file"]
    return set(out["modules"])


def test_import_botorch_dp_loads_neither_torch_nor_botorch_nor_any_heavy_module():
    loaded = _loaded_after("import botorch_dp")
    assert {"torch", "botorch", "gpytorch", "scipy", "numpy", *HEAVY}.isdisjoint(loaded)
    assert sorted(m for m in loaded if m.startswith("botorch_dp")) == ["botorch_dp"]


def test_neither_botorch_dp_nor_its_integrations_package_imports_ax():
    # ax-platform is an optional extra (botorch_dp.integrations.ax imports it, on demand)
    for code in ("import botorch_dp", "import botorch_dp.integrations"):
        loaded = _loaded_after(code)
        assert "botorch_dp.integrations.ax" not in loaded, code
        assert sorted(m for m in loaded if m == "ax" or m.startswith("ax.")) == [], code
    loaded = _loaded_after("import botorch_dp.integrations.ax")  # the probe sees an import of Ax
    assert {"ax", "botorch_dp.integrations.ax"} <= loaded


def test_the_public_names_and_core_subpackages_load_no_heavy_module():
    loaded = _loaded_after(
        "from botorch_dp import *\n" + "".join(f"import botorch_dp.{name}\n" for name in SUBPACKAGES)
    )
    assert "botorch_dp.optim.dp_gibo" in loaded and "botorch.acquisition.acquisition" in loaded
    assert sorted(set(HEAVY) & loaded) == []


@pytest.mark.parametrize("subpackage", ["baselines", "objectives", "problems", "training", "tuning", "evaluation"])
def test_the_other_subpackages_load_no_optional_dependency(subpackage):
    loaded = _loaded_after(f"import botorch_dp.{subpackage}")
    optional = {"opacus", "dask", "distributed", "sklearn", "matplotlib", "dp_accounting", "psycopg", "pandas"}
    assert sorted(optional & loaded) == []


def test_every_public_name_resolves_and_dir_lists_it():
    assert botorch_dp.__version__ == "0.1.0"
    for name in botorch_dp.__all__:
        assert getattr(botorch_dp, name) is not None, name
        assert name in dir(botorch_dp)
    namespace: dict = {}
    exec("from botorch_dp import *", namespace)
    assert set(botorch_dp.__all__) <= set(namespace)
    from botorch_dp import DPGIBO, qGradientInformation
    from botorch_dp.acquisition import qGradientInformation as defined
    from botorch_dp.optim import DPGIBO as loop

    assert qGradientInformation is defined and DPGIBO is loop
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        botorch_dp.nope  # noqa: B018
    with pytest.raises(ImportError):
        exec("from botorch_dp import nope", {})


def test_every_subpackage_is_an_attribute_and_its_all_resolves():
    modules = {m.name for m in pkgutil.iter_modules(botorch_dp.__path__)}
    assert set(botorch_dp._SUBMODULES) == modules
    for name in sorted(modules - {"demo", "plot", "audit"}):
        module = getattr(botorch_dp, name)
        assert module is importlib.import_module(f"botorch_dp.{name}") and name in dir(botorch_dp)
        for public in getattr(module, "__all__", []):
            assert hasattr(module, public), (name, public)
            assert public in dir(module), (name, public)


_ORDER = """
import sys
import botorch_dp.acquisition as acquisition
assert "botorch.acquisition.input_constructors" not in sys.modules
from botorch.acquisition.input_constructors import get_acqf_input_constructor
constructor = get_acqf_input_constructor(acquisition.qGradientInformation)
kwargs = constructor(model=object(), theta=[0.5, 0.5])
assert kwargs["theta"].tolist() == [0.5, 0.5] and kwargs["method"] == "auto"
assert not any(isinstance(f, acquisition._RegisterOnImport) for f in sys.meta_path), "the hook stays"
"""


def test_the_input_constructor_is_registered_when_botorch_loads_its_registry_later():
    # the other order (the registry loaded first) is tests/test_acquisition.py's
    done = subprocess.run(
        [sys.executable, "-c", _ORDER], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr


def test_tuning_all_lists_exactly_its_lazy_names():
    import botorch_dp.tuning as tuning

    assert sorted(tuning.__all__) == sorted(tuning._LAZY_NAMES) == tuning.__all__
