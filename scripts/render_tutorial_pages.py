r"""Render each notebook of ``tutorials/`` as a page of the documentation site: ``docs/tutorials/NAME.md``.

mkdocs-jupyter is not a dependency, so the pages are plain markdown made from the notebooks
themselves (committed without outputs): every markdown cell as it is, every code cell as a
python block. A code cell depends on the cells before it, so each block carries the
``<!-- docs: no-run (...) -->`` marker of ``tests/test_docs.py`` (which still compiles it);
the notebooks run as a whole in ``tests/tutorials/test_notebooks.py``. ``tests/test_docs.py``
checks that the committed pages are what this script writes, so after editing
``tutorials/_make_notebooks.py`` and regenerating the notebooks, run::

    python scripts/render_tutorial_pages.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "tutorials"
PAGES = ROOT / "docs" / "tutorials"


def render_notebook(path: Path) -> str:
    r"""The markdown page of one notebook: a note on where it comes from, then its cells in order."""
    notebook = nbformat.read(path, as_version=4)
    relative = path.relative_to(ROOT).as_posix()
    cells = notebook.cells
    if not cells or cells[0].cell_type != "markdown" or not cells[0].source.startswith("# "):
        raise ValueError(f"{relative}: the first cell must be a markdown cell with the '# ' title")
    title, _, rest = cells[0].source.partition("\n")
    parts = [
        title,
        (
            f"<!-- generated from {relative} by scripts/render_tutorial_pages.py: edit the notebook's generator, "
            "tutorials/_make_notebooks.py, not this page -->"
        ),
        (
            f"This page is the notebook `{relative}` without its outputs. To run it, install the tutorials "
            "extra and open it in JupyterLab (see the [tutorials](index.md) page)."
        ),
    ]
    if rest.strip():
        parts.append(rest.strip("\n"))
    number = 0
    for cell in cells[1:]:
        if cell.cell_type == "markdown":
            parts.append(cell.source.strip("\n"))
        elif cell.cell_type == "code" and cell.source.strip():
            number += 1
            parts.append(
                f"<!-- docs: no-run (code cell {number} of {relative}: it needs the cells before it; "
                "the notebook runs in tests/tutorials/test_notebooks.py) -->\n"
                f"```python\n{cell.source.strip(chr(10))}\n```"
            )
    return "\n\n".join(parts) + "\n"


def render_all() -> dict[Path, str]:
    r"""``{page path: text}`` for every notebook of ``tutorials/``."""
    return {PAGES / f"{nb.stem}.md": render_notebook(nb) for nb in sorted(TUTORIALS.glob("*.ipynb"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.parse_args(argv)
    PAGES.mkdir(parents=True, exist_ok=True)
    for page, text in render_all().items():
        page.write_text(text, encoding="utf-8")
        print(page.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
