r"""Docs that run (issue 16 item 5, issue 31 items 1 and 2): every ```python block of README.md,
tutorials/README.md and the documentation site's pages (docs/**/*.md), and the site itself.

Each block is written to stand alone, so each runs in a FRESH namespace (a reader may copy
any one block), in a temporary working directory (a block may write a checkpoint), with one
torch thread and its stdout captured. A block is not run only when an HTML comment right
above it says why:

- ``<!-- docs: no-run (reason) -->``: deliberately not runnable (e.g. it needs the user's own
  data or model); the reason in parentheses must not be empty;
- ``<!-- readme-main-example ... -->``: the README's main example, run exactly as written and
  checked in detail by tests/test_readme.py;
- ``<!-- docs: run-in (tests/FILE.py) -->``: run exactly as written and checked in detail by
  that test file, which must name the document (e.g. the Ax page's private run, in
  tests/integrations/test_ax.py).

Any other block that fails (SyntaxError, NameError, an exception) fails this test, and so does
one that uses an old flat option keyword of ``DPGIBOConfig`` (the deprecation shim's warnings are
errors there; tests/test_examples_spelling.py).
No-run blocks must still compile. Every python block of the documents written by hand (all but
the tutorial pages rendered from the notebooks) fits 88 columns and is what ``ruff format
--line-length 88`` makes of it (issue 43 item 5: the site's code column cuts longer lines).
Also checked: the ``tutorials`` extra of setup.cfg brings
JupyterLab (and ``dev`` does not), the documents say how to open the notebooks with it, the
docs and botorch_dp cite papers by authors (docs/references.md), not by seed number; every
page of docs/ is in the nav of mkdocs.yml (and every nav entry is a page); the tutorial pages
are what scripts/render_tutorial_pages.py makes of the notebooks; the ``docs`` extra (in
``dev``) brings MkDocs; and (slow) ``mkdocs build --strict`` passes and the API reference has
an entry for every name of each documented module's ``__all__``.
"""

import contextlib
import importlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from botorch_dp.utils import torch_threads

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The site's pages, and the two markdown documents outside it whose blocks also run.
PAGES = tuple(sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md")))
DOCUMENTS = ("README.md", "tutorials/README.md", *PAGES)
#: The modules of the API reference: docs/api/NAME.md documents ``botorch_dp.NAME`` (``botorch_dp.md`` the top).
API_MODULES = (
    "botorch_dp",
    "botorch_dp.tuning",
    "botorch_dp.optim",
    "botorch_dp.privacy",
    "botorch_dp.plan",
    "botorch_dp.training",
    "botorch_dp.distributed",
    "botorch_dp.baselines",
)
#: The column python blocks fit in, and the documents held to it: all but the tutorial pages, which
#: scripts/render_tutorial_pages.py renders from the notebooks.
COLUMN = 88
HAND_WRITTEN = tuple(d for d in DOCUMENTS if not (d.startswith("docs/tutorials/") and d != "docs/tutorials/index.md"))
NO_RUN = re.compile(r"<!-- docs: no-run \((?P<reason>[^)]*)\) -->\s*$")
RUN_ELSEWHERE = "<!-- readme-main-example"
RUN_IN = re.compile(r"<!-- docs: run-in \((?P<test>tests/[^)]+\.py)\) -->\s*$")
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
            if NO_RUN.search(above) or above.startswith(RUN_ELSEWHERE) or RUN_IN.search(above):
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
            no_run, run_in = NO_RUN.search(above), RUN_IN.search(above)
            if "docs: no-run" in above:
                assert no_run and no_run.group("reason").strip(), f"{document}:{line}: no-run needs a reason"
            elif "docs: run-in" in above:
                assert run_in, f"{document}:{line}: run-in names a test file, e.g. (tests/integrations/test_ax.py)"
                test = ROOT / run_in.group("test")
                assert test.is_file() and document in test.read_text("utf-8"), (document, line, test)
            else:
                assert above.startswith(RUN_ELSEWHERE), f"{document}:{line}: unknown marker {above!r}"
    # the extraction sees every fence that opens a python block
    for document in DOCUMENTS:
        assert counts[document] == (ROOT / document).read_text("utf-8").count("```python\n"), document
    assert counts["README.md"] >= 2 and counts["tutorials/README.md"] >= 2
    # the site's pages hold most of the examples, and most of them run
    assert sum(counts[page] for page in PAGES) >= 40
    assert sum(1 for case in runnable_blocks() if case.values[0].startswith("docs/")) >= 15
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


def _too_long(document: str) -> list[str]:
    return [
        f"{document}:{line + i}: {len(text)} characters"
        for line, _, code in python_blocks(document)
        for i, text in enumerate(code.splitlines(), 1)
        if len(text) > COLUMN
    ]


def _ruff_format_diff(paths: list[Path]) -> subprocess.CompletedProcess:
    r"""``ruff format --diff --line-length 88`` of the python blocks of ``paths`` (exit 1: a change)."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--diff", f"--line-length={COLUMN}", *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_python_blocks_fit_88_columns_and_are_formatted_at_that_width(tmp_path):
    assert "docs/how-to/tune-torch-model.md" in HAND_WRITTEN and "README.md" in HAND_WRITTEN
    assert "docs/tutorials/index.md" in HAND_WRITTEN and len(HAND_WRITTEN) >= len(DOCUMENTS) - 6
    too_long = [entry for document in HAND_WRITTEN for entry in _too_long(document)]
    assert not too_long, too_long
    done = _ruff_format_diff([ROOT / d for d in HAND_WRITTEN])
    assert done.returncode == 0, f"run: ruff format --line-length 88 <the document>\n{done.stdout[-3000:]}"
    # the checks see a block that breaks either rule
    page = tmp_path / "page.md"
    page.write_text("```python\nx = dict(a=1,\n  b=2)\n```\n", "utf-8")
    assert _ruff_format_diff([page]).returncode == 1
    long = tmp_path / "long.md"
    long.write_text("```python\nx = " + "1 + " * 21 + "1\n```\n", "utf-8")  # 89 characters
    assert _too_long(str(long)) == [f"{long}:2: 89 characters"]  # (an absolute path reads as itself)
    assert _ruff_format_diff([long]).returncode == 1


def test_no_run_marker_format():
    assert NO_RUN.search("<!-- docs: no-run (needs your own data) -->").group("reason") == "needs your own data"
    assert NO_RUN.search("<!-- docs: no-run () -->").group("reason") == ""
    assert NO_RUN.search("<!-- docs: no-run -->") is None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("document, line, code", runnable_blocks())
def test_block_runs(document, line, code, tmp_path, monkeypatch):
    from .test_examples_spelling import SHIM_WARNINGS  # (that module imports this one)

    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_block_{line}"}
    out = io.StringIO()
    with torch_threads(1), contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the examples use the strategy spelling: the deprecation shim's warnings are errors
        warnings.filterwarnings("error", message=SHIM_WARNINGS, category=DeprecationWarning)
        exec(compile(code, f"{ROOT / document}:{line}", "exec"), namespace)


def test_tutorials_extra_brings_jupyterlab_and_the_docs_say_how_to_open_the_notebooks():
    from setuptools.config.setupcfg import read_configuration

    extras = read_configuration(ROOT / "setup.cfg")["options"]["extras_require"]
    names = {e: {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs} for e, reqs in extras.items()}
    assert {"jupyterlab", "matplotlib", "nbclient", "ipykernel"} <= names["tutorials"]
    assert "jupyterlab" not in names["dev"]  # CI installs dev and runs the notebooks headless
    for document in ("README.md", "tutorials/README.md", "docs/tutorials/index.md"):
        text = (ROOT / document).read_text("utf-8")
        assert "pip install -e '.[tutorials]'" in text and "jupyter lab tutorials/" in text, document


def test_docs_cite_papers_by_authors_not_by_seed_number():
    texts = [ROOT / d for d in DOCUMENTS] + [ROOT / "reports" / "README.md"]
    texts += sorted((ROOT / "botorch_dp").rglob("*.py"))
    for path in texts:
        assert not re.search(r"\bseeds? 00\d", path.read_text("utf-8"), re.IGNORECASE), path
    for document in ("README.md", "docs/references.md"):
        text = (ROOT / document).read_text("utf-8")
        assert "*Scalable Differentially Private Bayesian Optimization*" in text and "Getoar Sopa" in text, document


# ---------------------------------------------------------------------- the site (issue 31 items 1 and 2)
def _nav_pages(entry) -> list[str]:
    r"""Every page a (nested) mkdocs nav entry names, in order."""
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in _nav_pages(value)]
    return [page for item in entry for page in _nav_pages(item)]


def _mkdocs_config() -> dict:
    import yaml  # MkDocs's own dependency, in the docs extra

    return yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))


def test_every_page_of_docs_is_in_the_nav_once_and_every_nav_entry_is_a_page():
    nav = _nav_pages(_mkdocs_config()["nav"])
    pages = {p.removeprefix("docs/") for p in PAGES}
    assert len(nav) == len(set(nav)), sorted(page for page in nav if nav.count(page) > 1)
    assert set(nav) == pages, (sorted(pages - set(nav)), sorted(set(nav) - pages))
    # the sections the issue asks for
    for page in (
        "index.md",
        "getting-started.md",
        "security.md",
        "architecture.md",
        "benchmarks/index.md",
        "how-to/ax.md",
        "performance.md",
        "api/index.md",
        "tutorials/index.md",
        "concepts/ledger.md",
    ):
        assert page in nav, page
    assert {f"tutorials/{nb.stem}.md" for nb in (ROOT / "tutorials").glob("*.ipynb")} <= set(nav)
    assert {f"api/{m.split('.')[-1]}.md" for m in API_MODULES} <= set(nav)


def test_the_site_config_documents_the_package_from_the_repository():
    config = _mkdocs_config()
    assert config["theme"]["name"] == "material" and config["strict"] is True
    handler = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    assert handler["handlers"]["python"]["paths"] == ["."]
    for page in (DOCS / "api").glob("*.md"):
        if page.stem != "index":
            module = "botorch_dp" if page.stem == "botorch_dp" else f"botorch_dp.{page.stem}"
            assert f"::: {module}\n" in page.read_text("utf-8"), page


def test_the_tutorial_pages_are_rendered_from_the_notebooks():
    spec = importlib.util.spec_from_file_location(
        "render_tutorial_pages", ROOT / "scripts" / "render_tutorial_pages.py"
    )
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    expected = render.render_all()
    committed = {p for p in (DOCS / "tutorials").glob("*.md") if p.name != "index.md"}
    assert set(expected) == committed, "run: python scripts/render_tutorial_pages.py"
    for page, text in expected.items():
        assert page.read_text("utf-8") == text, f"{page.name} is stale: run python scripts/render_tutorial_pages.py"


def test_the_docs_extra_brings_mkdocs_and_dev_includes_it():
    from setuptools.config.setupcfg import read_configuration

    extras = read_configuration(ROOT / "setup.cfg")["options"]["extras_require"]
    names = {e: {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs} for e, reqs in extras.items()}
    assert {"mkdocs", "mkdocs-material", "mkdocstrings"} <= names["docs"]
    assert names["docs"] <= names["dev"]  # CI installs dev and builds the site in this file's slow test
    assert any("mkdocstrings[python]" in r for r in extras["docs"])


def test_the_docs_say_which_test_command_to_use():
    for document in ("README.md", "docs/getting-started.md"):
        text = (ROOT / document).read_text("utf-8")
        assert "make test-fast" in text and "make test`" in text, document
        assert re.search(r"while\s+(you\s+)?edit", text, re.IGNORECASE) and re.search(r"before\s+a\s+commit", text), (
            document
        )


def _anchors(html: str) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', html))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_site_builds_strictly_and_the_api_reference_has_every_public_name(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    for page in PAGES:  # every page is built
        relative = Path(page).relative_to("docs").with_suffix("")
        html = site / (relative.parent if relative.name == "index" else relative) / "index.html"
        assert html.is_file(), page
    for name in API_MODULES:
        module = importlib.import_module(name)
        page = site / "api" / name.split(".")[-1] / "index.html"
        anchors = _anchors(page.read_text("utf-8"))
        missing = [
            member
            for member in module.__all__
            if not member.startswith("__")
            and f"{name}.{member}" not in anchors
            and f"{getattr(getattr(module, member), '__module__', name)}.{member}" not in anchors
        ]
        assert not missing, (name, missing)
    # a docstring's text reaches the page (not only an empty heading)
    top = (site / "api" / "botorch_dp" / "index.html").read_text("utf-8")
    assert "Continue a run from its checkpoint directory" in top
