"""Execute every tutorial notebook top to bottom (smoke settings) with nbclient, with the
deprecation shim's warnings as errors (the notebooks use the strategy spelling of the options),
and check that ``tutorials/_make_notebooks.py`` still generates the committed cells.

The kernel is a kernelspec written for THIS interpreter (``sys.executable``) into a
temporary prefix that is put first on ``JUPYTER_PATH``: a ``python3`` kernelspec in the
user's or the system's Jupyter directories (which take precedence over the venv's) could
otherwise start a different Python without the package.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIALS = Path(__file__).resolve().parents[2] / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
KERNEL_NAME = "botorch-dp-tests"
SMOKE_ENV = "BOTORCH_DP_TUTORIAL_SMOKE"


def _load_generator():
    """Import tutorials/_make_notebooks.py by path (importing it writes no files)."""
    spec = importlib.util.spec_from_file_location("_make_notebooks", TUTORIALS / "_make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    install(user=False, prefix=str(prefix), kernel_name=KERNEL_NAME)  # argv[0] = sys.executable
    data_dir = prefix / "share" / "jupyter"
    assert (data_dir / "kernels" / KERNEL_NAME / "kernel.json").exists()
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [str(data_dir), os.environ.get("JUPYTER_PATH")])))
    yield KERNEL_NAME
    mp.undo()


def _execute(nb, kernel_name: str, cwd: Path):
    client = nbclient.NotebookClient(
        nb, kernel_name=kernel_name, timeout=600, resources={"metadata": {"path": str(cwd)}}
    )
    client.execute()  # raises CellExecutionError if a cell errors
    return nb


def test_there_are_five_tutorials():
    assert [p.name for p in NOTEBOOKS] == [
        "01_acquisition_dropin.ipynb",
        "02_dp_gibo_gp_lengthscales.ipynb",
        "03_private_torch_tuning.ipynb",
        "04_objective_perturbation.ipynb",
        "05_plan_on_a_public_proxy.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_is_valid_and_cleared(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: outputs not cleared"
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert SMOKE_ENV in source  # the notebook honours the smoke switch


def test_generator_gives_the_committed_cells():
    generated = _load_generator().build_notebooks()
    assert sorted(generated) == [p.name for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        committed = nbformat.read(path, as_version=4)
        fresh = generated[path.name]
        assert [(c.cell_type, c.source) for c in fresh.cells] == [(c.cell_type, c.source) for c in committed.cells], (
            f"{path.name} differs from tutorials/_make_notebooks.py: regenerate it"
        )
        assert fresh.metadata == committed.metadata


@pytest.mark.timeout(120)
def test_kernel_runs_this_interpreter(kernel_name, tmp_path):
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(
        cells=[
            new_code_cell(
                "import os, sys, botorch_dp\nprint(sys.executable)\nprint(os.environ.get('" + SMOKE_ENV + "'))"
            )
        ]
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SMOKE_ENV, "1")
        _execute(nb, kernel_name, tmp_path)
    # stdout only: a warning on stderr (e.g. tqdm's "IProgress not found") is not the answer
    out = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.get("name") == "stdout").split()
    assert os.path.realpath(out[0]) == os.path.realpath(sys.executable)
    assert out[1] == "1"  # the environment reaches the kernel


def _shim_warnings_are_errors():
    r"""A first cell that makes the deprecation shim's warnings errors in the kernel: the notebooks use
    the strategy spelling (tests/test_examples_spelling.py)."""
    from nbformat.v4 import new_code_cell

    from ..test_examples_spelling import SHIM_WARNINGS

    return new_code_cell(
        f"import warnings\nwarnings.filterwarnings('error', message={SHIM_WARNINGS!r}, category=DeprecationWarning)"
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, kernel_name, tmp_path, monkeypatch):
    monkeypatch.setenv(SMOKE_ENV, "1")
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, _shim_warnings_are_errors())
    nb = _execute(nb, kernel_name, tmp_path)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert any(o.output_type == "display_data" for c in nb.cells for o in c.get("outputs", []))  # a plot
