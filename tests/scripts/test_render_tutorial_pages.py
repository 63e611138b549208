"""scripts/render_tutorial_pages.py (issue 31, item 1): a notebook becomes a page of the site with
its markdown cells as they are and each code cell as a python block that tests/test_docs.py
compiles but does not run (it needs the cells before it). That the committed pages are up to
date is checked in tests/test_docs.py."""

import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.helpers import loaded_script
from tests.test_docs import FENCE, NO_RUN


def _write(path, cells):
    nbformat.write(new_notebook(cells=cells), path)
    return path


def test_cells_become_the_page_in_order_with_each_code_cell_marked_no_run(tmp_path, monkeypatch):
    with loaded_script("render_tutorial_pages") as script:
        monkeypatch.setattr(script, "ROOT", tmp_path)
        notebook = _write(
            tmp_path / "07_example.ipynb",
            [
                new_markdown_cell("# 7. An example\n\nThe intro, with $x^2$."),
                new_code_cell("x = 2"),
                new_markdown_cell("## A section\n\nText."),
                new_code_cell("   "),  # an empty cell is left out
                new_code_cell("print(x ** 2)"),
            ],
        )
        page = script.render_notebook(notebook)
    assert page.startswith("# 7. An example\n\n<!-- generated from 07_example.ipynb")
    assert page.index("The intro, with $x^2$.") < page.index("## A section") < page.index("print(x ** 2)")
    blocks = [(m.group("code"), page[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]) for m in FENCE.finditer(page)]
    assert [code for code, _ in blocks] == ["x = 2\n", "print(x ** 2)\n"]
    for number, (_, above) in enumerate(blocks, start=1):
        marker = NO_RUN.search(above)
        assert marker and f"code cell {number} of 07_example.ipynb" in marker.group("reason")
    assert page.endswith("```\n") and not re.search(r"\n{3,}", page)


def test_a_notebook_without_a_title_cell_is_refused(tmp_path, monkeypatch):
    with loaded_script("render_tutorial_pages") as script:
        monkeypatch.setattr(script, "ROOT", tmp_path)
        notebook = _write(tmp_path / "untitled.ipynb", [new_code_cell("x = 1")])
        with pytest.raises(ValueError, match=r"untitled\.ipynb: the first cell must be a markdown cell"):
            script.render_notebook(notebook)


def test_main_writes_one_page_per_notebook(tmp_path, monkeypatch, capsys):
    with loaded_script("render_tutorial_pages") as script:
        (tmp_path / "tutorials").mkdir()
        for name in ("01_a", "02_b"):
            _write(tmp_path / "tutorials" / f"{name}.ipynb", [new_markdown_cell(f"# {name}"), new_code_cell("pass")])
        monkeypatch.setattr(script, "ROOT", tmp_path)
        monkeypatch.setattr(script, "TUTORIALS", tmp_path / "tutorials")
        monkeypatch.setattr(script, "PAGES", tmp_path / "docs" / "tutorials")
        assert script.main([]) == 0
    pages = sorted(p.name for p in (tmp_path / "docs" / "tutorials").iterdir())
    assert pages == ["01_a.md", "02_b.md"]
    assert capsys.readouterr().out.split() == ["docs/tutorials/01_a.md", "docs/tutorials/02_b.md"]
    assert (tmp_path / "docs" / "tutorials" / "01_a.md").read_text().startswith("# 01_a\n")
