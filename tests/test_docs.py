r"""Docs that run (issue 16 item 5): every ```python block of README.md and tutorials/README.md.

Each block is written to stand alone, so each runs in a FRESH namespace (a reader may copy
any one block), in a temporary working directory (a block may write a checkpoint), with one
torch thread and its stdout captured. A block is not run only when an HTML comment right
above it says why:

- ``<!-- docs: no-run (reason) -->``: deliberately not runnable (e.g. it needs the user's own
  data or model); the reason in parentheses must not be empty;
- ``<!-- readme-main-example ... -->``: the README's main example, run exactly as written and
  checked in detail by tests/test_readme.py.

Any other block that fails (SyntaxError, NameError, an exception) fails this test.
No-run blocks must still compile. Also checked: the ``tutorials`` extra of setup.cfg brings
JupyterLab (and ``dev`` does not), both documents say how to open the notebooks with it, and
the docs and botorch_dp cite papers by authors (README "References"), not by seed number.
"""

import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

from botorch_dp.utils import torch_threads

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "tutorials/README.md")
NO_RUN = re.compile(r"<!-- docs: no-run \((?P<reason>[^)]*)\) -->\s*$")
RUN_ELSEWHERE = "<!-- readme-main-example"
FENCE = re.compile(r"^```python\n(?P<code>.*?)^```\s*$", re.DOTALL | re.MULTILINE)


def python_blocks(document: str) -> list[tuple[int, str, str]]:
    r"""``(line, the comment line right above or "", code)`` of each python block, in order."""
    text = (ROOT / document).read_text("utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append((line, above if above.lstrip().startswith("<!--") else "", match.group("code")))
    return blocks


def runnable_blocks() -> list:
    cases = []
    for document in DOCUMENTS:
        for line, above, code in python_blocks(document):
            if NO_RUN.search(above) or above.startswith(RUN_ELSEWHERE):
                continue
            cases.append(pytest.param(document, line, code, id=f"{document}:{line}"))
    return cases


def test_blocks_are_found_and_every_skipped_block_says_why():
    counts = {}
    for document in DOCUMENTS:
        blocks = python_blocks(document)
        counts[document] = len(blocks)
        for line, above, _ in blocks:
            if not above:
                continue
            no_run = NO_RUN.search(above)
            if "docs: no-run" in above:
                assert no_run and no_run.group("reason").strip(), f"{document}:{line}: no-run needs a reason"
            else:
                assert above.startswith(RUN_ELSEWHERE), f"{document}:{line}: unknown marker {above!r}"
    # the extraction sees every fence that opens a python block
    for document in DOCUMENTS:
        assert counts[document] == (ROOT / document).read_text("utf-8").count("```python\n"), document
    assert counts["README.md"] >= 5 and counts["tutorials/README.md"] >= 2
    # exactly one block is run by tests/test_readme.py
    assert sum(a.startswith(RUN_ELSEWHERE) for d in DOCUMENTS for _, a, _ in python_blocks(d)) == 1


def test_no_run_blocks_are_still_valid_python():
    compiled = 0
    for document in DOCUMENTS:
        for line, above, code in python_blocks(document):
            if NO_RUN.search(above):
                compile(code, f"{ROOT / document}:{line}", "exec")  # a SyntaxError fails here
                compiled += 1
    assert compiled >= 2


def test_no_run_marker_format():
    assert NO_RUN.search("<!-- docs: no-run (needs your own data) -->").group("reason") == "needs your own data"
    assert NO_RUN.search("<!-- docs: no-run () -->").group("reason") == ""
    assert NO_RUN.search("<!-- docs: no-run -->") is None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("document, line, code", runnable_blocks())
def test_block_runs(document, line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_block_{line}"}
    out = io.StringIO()
    with torch_threads(1), contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, f"{ROOT / document}:{line}", "exec"), namespace)


def test_tutorials_extra_brings_jupyterlab_and_the_docs_say_how_to_open_the_notebooks():
    from setuptools.config.setupcfg import read_configuration

    extras = read_configuration(ROOT / "setup.cfg")["options"]["extras_require"]
    names = {e: {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs} for e, reqs in extras.items()}
    assert {"jupyterlab", "matplotlib", "nbclient", "ipykernel"} <= names["tutorials"]
    assert "jupyterlab" not in names["dev"]  # CI installs dev and runs the notebooks headless
    for document in DOCUMENTS:
        text = (ROOT / document).read_text("utf-8")
        assert "pip install -e '.[tutorials]'" in text and "jupyter lab tutorials/" in text, document


def test_docs_cite_papers_by_authors_not_by_seed_number():
    texts = [ROOT / d for d in DOCUMENTS] + [ROOT / "reports" / "README.md"]
    texts += sorted((ROOT / "botorch_dp").rglob("*.py"))
    for path in texts:
        assert not re.search(r"\bseeds? 00\d", path.read_text("utf-8"), re.IGNORECASE), path
    readme = (ROOT / "README.md").read_text("utf-8")
    assert "*Scalable Differentially Private Bayesian Optimization*" in readme and "Getoar Sopa" in readme
