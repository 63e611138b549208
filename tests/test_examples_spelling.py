r"""The examples use the strategy spelling (issue 42): no tutorial, documentation example, script
or benchmark passes an old flat option keyword of ``DPGIBOConfig`` (``clip_bound=``,
``batch_size=``, ``noise_schedule=``, ...) or reads an old attribute (``config.batch_size``),
each of which works only through the deprecation shim (``optim.legacy_options``, ``optim.deprecated``).

The deprecated names are the shim's own: the keywords of ``legacy_options.FLAT_FIELDS`` and
``config.RENAMED_FIELDS``, the attributes every property of ``DPGIBOConfig`` whose docstring says
"Deprecated". Two checks:

- statically (fast, everything): the python of the scripts, the benchmarks, every python block of
  the documents (``tests/test_docs.py``'s, run or not), the inline code of the documents and the
  code cells of the tutorial notebooks is parsed, and each call of a function that takes
  ``DPGIBOConfig``'s keywords (``DPGIBOConfig``, ``DPGIBOConfig.from_preset``, ``tune``,
  ``baselines.gibo``: ``ENTRY_POINTS``) is checked for a deprecated keyword that is not one of the
  function's own parameters, also inside ``**{...}``, ``**dict(...)`` and ``**name`` where ``name``
  is a dict built in the same source. Attribute reads are checked on what is statically a config:
  a name bound to one of those calls, a ``.config`` attribute, or a name ``config``. A dict built
  elsewhere (a function's return value) is not followed;
- at run time: ``SHIM_WARNINGS`` is the ``filterwarnings`` regex of the shim's warnings; the
  documents' blocks (``tests/test_docs.py::test_block_runs``) and the notebooks
  (``tests/tutorials/test_notebooks.py``, slow) run with those warnings as errors.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from botorch_dp import DPGIBOConfig, tune
from botorch_dp.baselines import gibo
from botorch_dp.optim.config import RENAMED_FIELDS
from botorch_dp.optim.legacy_options import FLAT_FIELDS

from .test_docs import DOCUMENTS, python_blocks

ROOT = Path(__file__).resolve().parents[1]
#: The old keywords that ``DPGIBOConfig`` (and what passes its keywords on) takes with a warning.
DEPRECATED_KEYWORDS = frozenset(FLAT_FIELDS) | frozenset(RENAMED_FIELDS)
#: The old attributes of a config: its properties documented as deprecated (the flat fields, the
#: renamed ones and the old shares of μ).
DEPRECATED_ATTRIBUTES = frozenset(
    name
    for name, value in vars(DPGIBOConfig).items()
    if isinstance(value, property) and (value.__doc__ or "").startswith("Deprecated")
)
#: A deprecation warning of the shim, by its message (``warnings.filterwarnings`` matches it at the start).
SHIM_WARNINGS = rf"DPGIBOConfig[.(]({'|'.join(sorted(DEPRECATED_ATTRIBUTES | DEPRECATED_KEYWORDS))})\b"


def _own_parameters(function) -> frozenset[str]:
    return frozenset(inspect.signature(function).parameters)


#: Callee name -> its own parameters: the functions whose ``**`` keywords reach ``DPGIBOConfig``.
ENTRY_POINTS: dict[str, frozenset[str]] = {
    "DPGIBOConfig": frozenset(),
    "from_preset": frozenset(),
    "tune": _own_parameters(tune) - {"settings"},
    "gibo": _own_parameters(gibo) - {"config_kwargs"},
}


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _dict_keys(
    node: ast.expr | None, dicts: dict[str, list[ast.expr]], seen: frozenset[str] = frozenset()
) -> Iterator[str]:
    r"""The constant keys of the dict that ``node`` builds (a literal, ``dict(...)`` or a name bound to one)."""
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                yield from _dict_keys(value, dicts, seen)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield key.value
    elif isinstance(node, ast.Call) and _callee(node.func) in ("dict", "update"):
        for keyword in node.keywords:
            if keyword.arg is None:
                yield from _dict_keys(keyword.value, dicts, seen)
            else:
                yield keyword.arg
        for arg in node.args:
            yield from _dict_keys(arg, dicts, seen)
    elif isinstance(node, ast.Name) and node.id not in seen:
        for built in dicts.get(node.id, []):
            yield from _dict_keys(built, dicts, seen | {node.id})


def _bindings(tree: ast.AST) -> tuple[dict[str, list[ast.expr]], set[str]]:
    r"""The dicts each name is built from (assignments, ``name.update(...)``, ``name[key] = ...``) and
    the names bound to a call of an entry point (configs)."""
    dicts: dict[str, list[ast.expr]] = {}
    configs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    dicts.setdefault(target.id, []).append(node.value)
                    if isinstance(node.value, ast.Call) and _callee(node.value.func) in ("DPGIBOConfig", "from_preset"):
                        configs.add(target.id)
                elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    dicts.setdefault(target.value.id, []).append(ast.Dict(keys=[target.slice], values=[node.value]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            if isinstance(node.func.value, ast.Name):
                dicts.setdefault(node.func.value.id, []).append(node)
    return dicts, configs


def _is_config(node: ast.expr, configs: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "config" or node.id in configs
    return isinstance(node, ast.Attribute) and node.attr == "config"


def deprecated_uses(source: str, attributes: bool = True) -> list[tuple[int, str]]:
    r"""``(line, what)`` of each deprecated keyword passed to an entry point in ``source`` and (with
    ``attributes``) each deprecated attribute read off a config."""
    tree = ast.parse(source)
    dicts, configs = _bindings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (callee := _callee(node.func)) in ENTRY_POINTS:
            names = [k.arg for k in node.keywords if k.arg is not None]
            names += [key for k in node.keywords if k.arg is None for key in _dict_keys(k.value, dicts)]
            found += [
                (node.lineno, f"{callee}({name}=...)")
                for name in names
                if name in DEPRECATED_KEYWORDS and name not in ENTRY_POINTS[callee]
            ]
        elif attributes and isinstance(node, ast.Attribute) and node.attr in DEPRECATED_ATTRIBUTES:
            if isinstance(node.ctx, ast.Load) and _is_config(node.value, configs):
                found.append((node.lineno, f"{ast.unparse(node)}"))
    return sorted(found)


INLINE_CODE = re.compile(r"`([^`\n]+)`")
FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def _inline_calls(text: str) -> Iterator[tuple[int, str]]:
    r"""The inline code spans of markdown ``text`` (outside fences) that are python expressions."""
    outside = FENCED.sub(lambda m: "\n" * m.group().count("\n"), text)
    for match in INLINE_CODE.finditer(outside):
        try:
            ast.parse(match.group(1), mode="eval")
        except SyntaxError:
            continue
        yield outside.count("\n", 0, match.start()) + 1, match.group(1)


def example_sources() -> Iterator[tuple[str, str, bool]]:
    r"""``(where, python source, whether to check attribute reads)`` of every example."""
    for folder in ("scripts", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text("utf-8"), True
    for document in DOCUMENTS:
        for line, _, code in python_blocks(document):
            yield f"{document}:{line}", code, True
        for line, code in _inline_calls((ROOT / document).read_text("utf-8")):
            # prose names the old spelling where it explains the deprecation (`config.clip_bound`)
            yield f"{document}:{line} (inline)", code, False
    for path in sorted((ROOT / "tutorials").glob("*.ipynb")):
        cells = json.loads(path.read_text("utf-8"))["cells"]
        for index, cell in enumerate(cells):
            source = "".join(cell["source"])
            where = f"{path.relative_to(ROOT).as_posix()} cell {index}"
            if cell["cell_type"] == "code":
                yield where, source, True
            else:
                for line, code in _inline_calls(source):
                    yield f"{where}:{line} (inline)", code, False


def test_the_deprecated_names_are_the_shims():
    assert set(FLAT_FIELDS) <= DEPRECATED_ATTRIBUTES and set(RENAMED_FIELDS) <= DEPRECATED_ATTRIBUTES
    assert {"steps_privacy_mu", "selection_privacy_mu"} <= DEPRECATED_ATTRIBUTES
    fields = {f.name for f in dataclasses.fields(DPGIBOConfig)}
    assert not DEPRECATED_KEYWORDS & fields and not DEPRECATED_ATTRIBUTES & fields
    assert "clip_bound" in ENTRY_POINTS["gibo"] and "loss_clip" in ENTRY_POINTS["tune"]  # their own parameters


def test_no_example_uses_a_deprecated_keyword_or_attribute():
    sources = list(example_sources())
    kinds = {where.split("/")[0].split(":")[0] for where, _, _ in sources}
    assert {"scripts", "benchmarks", "docs", "tutorials", "README.md"} <= kinds
    assert sum(".ipynb" in where for where, _, _ in sources) >= 20  # the notebooks' cells are read
    uses = [
        f"{where}: line {line}: {what}"
        for where, source, attrs in sources
        for line, what in deprecated_uses(source, attrs)
    ]
    assert not uses, "use the strategy spelling (optim.options):\n" + "\n".join(uses)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("DPGIBOConfig(bounds=b, clip_bound=2.0)", [(1, "DPGIBOConfig(clip_bound=...)")]),
        (
            "from botorch_dp import DPGIBOConfig as C\nbotorch_dp.DPGIBOConfig(batch_size=3)",
            [(2, "DPGIBOConfig(batch_size=...)")],
        ),
        ("DPGIBOConfig.from_preset('paper', noise_schedule='adaptive_norm')", [(1, "from_preset(noise_schedule=...)")]),
        ("tune(f, space, epsilon=1.0, batch_size=3, loss_clip=2.0)", [(1, "tune(batch_size=...)")]),
        ("gibo(f, b, kernel=k, clip_bound=1.0, acqf_speed='reference')", [(1, "gibo(acqf_speed=...)")]),
        (
            "base = dict(clip_bound=1.0)\nbase.update(batch_search='joint')\nDPGIBOConfig(**{**base, 'seed': 0})",
            [(3, "DPGIBOConfig(batch_search=...)"), (3, "DPGIBOConfig(clip_bound=...)")],
        ),
        ("kw = {}\nkw['privacy_budget_mu'] = 1.0\nDPGIBOConfig(**kw)", [(3, "DPGIBOConfig(privacy_budget_mu=...)")]),
        ("c = DPGIBOConfig(bounds=b)\nc.batch_size", [(2, "c.batch_size")]),
        (
            "opt.config.steps_privacy_mu + config.clip_bound",
            [(1, "config.clip_bound"), (1, "opt.config.steps_privacy_mu")],
        ),
        # the new spelling, and the same names where they are not DPGIBOConfig's
        ("DPGIBOConfig(bounds=b, clip=FixedClip(2.0), batches=FixedBatches(3))", []),
        ("TrainingConfig(batch_size=64); noisy_gradient_descent(p, b, clip_bound=1.0); args.batch_size", []),
        ("training = TrainingConfig(batch_size=64)\ntraining.batch_size; dataclasses.replace(s, acqf_maxiter=1)", []),
    ],
)
def test_the_check_sees_the_old_spelling_and_only_it(source, expected):
    assert deprecated_uses(source) == expected


def test_the_inline_code_of_prose_is_checked_for_calls_only():
    text = 'Set `DPGIBOConfig(acqf_speed="reference")`; `config.clip_bound` warns.\n```python\nx = 1\n```\n'
    spans = list(_inline_calls(text))
    assert spans == [(1, 'DPGIBOConfig(acqf_speed="reference")'), (1, "config.clip_bound")]
    assert [deprecated_uses(code, attributes=False) for _, code in spans] == [[(1, "DPGIBOConfig(acqf_speed=...)")], []]


def test_the_run_time_filter_matches_the_shims_warnings_and_no_other():
    from botorch_dp.problems import NormalLocation

    problem = NormalLocation()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("error", message=SHIM_WARNINGS, category=DeprecationWarning)
        config = DPGIBOConfig(bounds=problem.bounds, kernel=problem.recommended_kernel())  # the new spelling passes
        with pytest.raises(DeprecationWarning, match="use clip=FixedClip"):
            DPGIBOConfig(bounds=problem.bounds, kernel=problem.recommended_kernel(), clip_bound=2.0)
        for name in ("batch_size", "privacy_budget_mu", "steps_privacy_mu"):
            with pytest.raises(DeprecationWarning, match=f"DPGIBOConfig.{name} is deprecated"):
                getattr(config, name)
        warnings.warn("tune(old=...) is deprecated", DeprecationWarning, stacklevel=1)  # not the shim's: no error
    assert not re.match(SHIM_WARNINGS, "DPGIBOConfig(clip=...) is deprecated")  # a field's name is not an old one
    assert not re.match(SHIM_WARNINGS, "DPGIBOConfig(clip_boundary=...) is deprecated")  # whole names only
