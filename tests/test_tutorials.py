"""Execute every tutorial notebook top to bottom (smoke settings) with nbclient.

The kernel is a kernelspec written for THIS interpreter (``sys.executable``) into a
temporary prefix that is put first on ``JUPYTER_PATH``: a ``python3`` kernelspec in the
user's or the system's Jupyter directories (which take precedence over the venv's) could
otherwise start a different Python without the package.
"""

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
KERNEL_NAME = "botorch-dp-tests"
SMOKE_ENV = "BOTORCH_DP_TUTORIAL_SMOKE"


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


def test_there_are_three_tutorials():
    assert [p.name for p in NOTEBOOKS] == [
        "01_acquisition_dropin.ipynb",
        "02_dp_gibo_gp_lengthscales.ipynb",
        "03_private_torch_tuning.ipynb",
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


@pytest.mark.timeout(120)
def test_kernel_runs_this_interpreter(kernel_name, tmp_path):
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell(
        "import os, sys, botorch_dp\nprint(sys.executable)\nprint(os.environ.get('" + SMOKE_ENV + "'))"
    )])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SMOKE_ENV, "1")
        _execute(nb, kernel_name, tmp_path)
    stdout = [o for o in nb.cells[0].outputs if o.get("name") == "stdout"]  # warnings go to stderr
    out = "".join(o.get("text", "") for o in stdout).split()
    assert os.path.realpath(out[0]) == os.path.realpath(sys.executable)
    assert out[1] == "1"  # the environment reaches the kernel


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, kernel_name, tmp_path, monkeypatch):
    monkeypatch.setenv(SMOKE_ENV, "1")
    nb = _execute(nbformat.read(path, as_version=4), kernel_name, tmp_path)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    assert any(o.output_type == "display_data" for c in nb.cells for o in c.get("outputs", []))  # a plot
