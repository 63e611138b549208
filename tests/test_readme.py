r"""The README's main example (issue 16 item 4), run exactly as written.

The block after the ``readme-main-example`` marker is extracted from README.md and
executed unchanged (tests/test_docs.py runs every other python block of the docs and
skips this one): it must tune three hyperparameters of a torch classifier with ``tune()``
(issue 30, item 6) at ε = 1 in at most 15 lines, say where planning on a public proxy fits,
and release a guarantee that is that target.
"""

import contextlib
import io
import math
import re
from pathlib import Path

import pytest
import torch

from botorch_dp.privacy.analysis.gdp import gdp_epsilon, gdp_mu
from botorch_dp.utils import torch_threads

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- readme-main-example"


def main_example() -> str:
    r"""The python block right below the marker comment (exactly one in the README)."""
    text = README.read_text("utf-8")
    blocks = re.findall(re.escape(MARKER) + r"[^\n]*-->\n```python\n(.*?)\n```", text, re.DOTALL)
    assert len(blocks) == 1 and text.count(MARKER) == 1, "exactly one marker, right above a python block"
    return blocks[0]


def test_main_example_is_short():
    lines = main_example().splitlines()
    assert len(lines) <= 15, len(lines)
    assert "epsilon=1.0" in main_example() and "delta=" in main_example()
    assert "tune(" in main_example() and "proxy=" in main_example()  # the one call, and where planning fits


@pytest.mark.timeout(300)
def test_main_example_runs_and_releases_the_target_guarantee():
    namespace: dict = {"__name__": "readme_main_example"}
    out = io.StringIO()
    with torch_threads(1), contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        exec(compile(main_example(), str(README), "exec"), namespace)
    space, objective, result = namespace["space"], namespace["objective"], namespace["result"]
    # three hyperparameters of a torch classifier, routed by name: Adam's two, the model's one
    assert space.names == ["lr", "weight_decay", "dropout"]
    assert objective.routes == {"lr": "optimizer", "weight_decay": "optimizer", "dropout": "model"}
    assert objective.optimizer is torch.optim.Adam and objective.num_users == 269
    assert objective.data.X_train.dtype == torch.float64  # the numpy data as given
    # the whole procedure at the target (ε, δ) = (1, 1e-5): μ by exact GDP inversion
    g = result.guarantee
    assert abs(g.mu - gdp_mu(1.0, 1e-5)) <= 1e-12 and g.delta == 1e-5
    assert g.epsilon == pytest.approx(1.0, rel=1e-9) and math.isclose(gdp_epsilon(g.mu, 1e-5), 1.0, rel_tol=1e-9)
    assert result.ledger.validation.mu() == pytest.approx(g.mu, rel=1e-12)  # everything it charged
    # a continuous space: one DP-GIBO run (no choice among configurations), ten steps
    assert len(result.runs) == 1 and result.runs[0].noisy_score is None and result.score_mu is None
    release = result.runs[0].result.release
    assert release.guarantee.num_steps == 10 and len(release.iterates) == 11
    assert ((release.theta >= 0) & (release.theta <= 1)).all()
    # one training per evaluation, and nothing else trained
    assert len(release.evaluation_points) == sum(release.batch_sizes) == objective.num_trainings
    # the tuned hyperparameters: plain Python floats inside their bounds, the released θ in natural units
    h = result.hyperparameters
    assert h == space.to_natural(release.theta) and list(h) == space.names
    assert all(type(v) is float for v in h.values())
    assert 1e-4 <= h["lr"] <= 1e-1 and 1e-6 <= h["weight_decay"] <= 1e-1 and 0.0 <= h["dropout"] <= 0.5
    # what it prints: the tuned hyperparameters and the statement of the guarantee
    printed = out.getvalue()
    assert printed == f"{h}\n{result.guarantee_report()}\n"
    assert "validation users (replace one user's losses): (epsilon = 1, delta = 1e-05)-DP" in printed
    protected, unprotected = printed.split("What was NOT protected:")
    assert "training records" not in protected  # no DP-SGD here: only the validation users are protected,
    assert "training records: NO guarantee" in unprotected  # and the report says the training rows are not


def test_the_readme_is_a_readme_with_links_that_resolve():
    r"""Issue 31 item 3: at most 250 lines, the rest in the documentation site; every relative link
    (into docs/ and reports/) names a file of the repository."""
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 250, len(text.splitlines())
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    relative = [link for link in links if "://" not in link]
    assert len(relative) >= 10 and any(link.startswith("docs/") for link in relative)
    missing = [link for link in relative if not (README.parent / link).is_file()]
    assert not missing, missing
    for section in (
        "## Install, and the two commands",
        "## Main example",
        "## The acquisition as a drop-in",
        "## Headline results",
    ):
        assert section in text, section
