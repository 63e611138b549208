r"""The deep hidden-K check: everything a user can reach from what a private selection returns, walked and compared
between two runs whose hidden number of trials K differ.

The rule it checks: *a selection reveals nothing of K or its losing trials, anywhere.* Comparing ``repr`` and
``to_json()`` alone misses a K-dependent value put into a field those do not show (a guarantee's ``details``, a
``not_protected`` entry, a ledger record's description). ``observe`` runs the call once and collects

- every public attribute of the returned result, recursively: dataclass fields, ``vars()`` and public properties
  of the package's objects, mappings, sequences, tensors and arrays (dtype, shape, values), the guarantee objects
  and their ``details``, ``protected`` / ``not_protected``, ``advice``, the settings, the method's information, the
  released model (its public attributes and ``state_dict``), the ledger and its records;
- the text each reporting method gives (``to_json``, ``guarantee_report``, ``runs_explained``, ``released_values``,
  ``describe``, ``to_dict`` and the like, called with no argument on every object walked), and ``repr``/``str`` of
  every object of the package;
- the warnings the call emits (category and message), the package's log records (level, logger, message) and
  what it prints to stdout and stderr (the progress bar).

``assert_same_walk`` compares two such observations after masking ONLY what legitimately differs with the noise:

- the floats of the RELEASED values (Python, NumPy and tensor values at a path ``NOISY`` matches: the released
  hyperparameters, the noisy/released score, ``theta``, the released model and its ``state_dict``, a DP-GIBO
  winner's ``release`` (its noisy iterates), ``released_values()`` rows' values, ``to_json()``'s configurations);
  every OTHER float value (ε, δ, σ, μ, a details entry, a ledger record's RDP curve) is compared exactly;
- the decimal numbers written in TEXT (repr, str, reports, warnings, logs, stderr): text mixes the released
  values and the wall time with the rest, and cannot be told apart by path;
- the released hyperparameters' non-numeric values, as whole words (a categorical's chosen level differs with the
  winner);
- identifiers: 32-hex run ids and ``0x…`` memory addresses; the spaces after ``[``, ``(`` and ``,`` (a tensor's
  repr pads a float by its sign).

Integers are compared EXACTLY, as values and in text (counts are what would reveal K: ``len(runs)``, a number of
records, a number of calls, "K = 3"), and so are strings, keys, types, shapes, dtypes and integer tensors. A float
``K`` written in text (``"3.0"``) or under a released path would be masked: the walk also refuses any key or
attribute named like a count of trials (``num_trials``, ``num_evaluations``, ``trials``, ``losing...``, ``k``),
whatever its value. Warnings are recorded with ``simplefilter("always")``, so none is deduplicated away.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import numpy as np
import torch

# the reporting methods called with no argument on every object walked (released_values as a list of dicts)
REPORTS = (
    "to_json",
    "guarantee_report",
    "runs_explained",
    "released_values",
    "describe",
    "to_dict",
    "summary",
    "records",
    "run_ids",
    "events",
)
REPORT_KWARGS = {"released_values": {"as_frame": False}}
# names a selection's outputs must never carry (a count or a list of trials)
FORBIDDEN_NAME = re.compile(r"num_trials|num_evaluations|^trials$|^losing|^k$", re.IGNORECASE)
FLOAT_IN_TEXT = re.compile(r"(?<![\w.])[-+]?(\d+\.\d*|\.\d+|\d+(?=[eE]))([eE][-+]?\d+)?|\b(nan|inf)\b")
HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")
ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
PADDING = re.compile(r"(?<=[\[(,]) +")
# where a float is a released value or derived from one (the noise): masked in non-text values
NOISY = re.compile(
    r"hyperparameters|noisy_score|released_score|theta|\.model\b|state_dict|released_values\(\)\[\d+\]\.value"
    r"|configurations\[\d+\]|\.release\b"
)
MAX_DEPTH = 14
FLOAT = "<float>"


@dataclasses.dataclass
class Observation:
    r"""What one call let a user see: the result and everything the call emitted."""

    result: Any
    warnings: list[tuple[str, str]]
    logs: list[tuple[str, str, str]]
    stdout: str
    stderr: str


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[tuple[str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.name, record.getMessage()))


def observe(call: Callable[[], Any]) -> Observation:
    r"""Runs ``call()`` capturing every warning (``"always"``: none deduplicated away), the log records of the
    package's loggers at DEBUG, and stdout/stderr."""
    handler, logger = _Records(), logging.getLogger("botorch_dp")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    out, err = io.StringIO(), io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, redirect_stdout(out), redirect_stderr(err):
            warnings.simplefilter("always")
            result = call()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    emitted = [(w.category.__name__, str(w.message)) for w in caught]
    return Observation(result, emitted, handler.records, out.getvalue(), err.getvalue())


def _released_words(result: Any) -> list[str]:
    r"""The released hyperparameters' non-numeric values (a categorical level), longest first, to mask in text."""
    values = getattr(result, "hyperparameters", None)
    if not isinstance(values, Mapping):
        return []
    words = {str(v) for v in values.values() if isinstance(v, str) and v}
    return sorted(words | {repr(w) for w in words}, key=len, reverse=True)


def mask_text(text: str, released: Sequence[str] = ()) -> str:
    r"""Masks ids, addresses, the released categorical levels and every decimal number; integers stay."""
    text = HEX_ID.sub("<id>", ADDRESS.sub("<addr>", text))
    for word in released:  # whole words only ("sgd" but not the "sgd" of "dp_sgd")
        text = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", "<released>", text)
    return PADDING.sub("", FLOAT_IN_TEXT.sub(FLOAT, text))  # a tensor's repr pads a float by its sign


def _is_ours(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "botorch_dp"


class _Walker:
    def __init__(self, released: list[str]) -> None:
        self.released, self.rows = released, list[tuple[str, str, Any]]()
        self.seen: dict[int, Any] = {}  # id -> the object, kept alive (a report's fresh output frees its id)

    def row(self, path: str, kind: str, value: Any) -> None:
        self.rows.append((path, kind, value))

    def name(self, path: str, key: Any) -> str:
        if isinstance(key, str) and FORBIDDEN_NAME.search(key):
            raise AssertionError(f"{path}: a selection's output carries {key!r}, a count or a list of trials")
        return f"{path}.{key}" if isinstance(key, str) else f"{path}[{key!r}]"

    def text(self, path: str, value: str) -> None:
        self.row(path, "str", mask_text(value, self.released))

    def walk(self, value: Any, path: str, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            self.row(path, "too-deep", type(value).__name__)
            return
        if value is None or isinstance(value, bool):
            self.row(path, "const", value)
        elif isinstance(value, (int, np.integer)):
            self.row(path, "int", int(value))  # exact: counts
        elif isinstance(value, (float, np.floating)):
            self.row(path, "float", float(value))  # exact unless released (``NOISY``)
        elif isinstance(value, str):
            self.text(path, value)
        elif isinstance(value, (bytes, bytearray)):
            self.row(path, "bytes", len(value))
        elif isinstance(value, torch.Tensor):
            self.tensor(path, value.detach().cpu())
        elif isinstance(value, np.ndarray):
            self.tensor(path, torch.as_tensor(value) if value.dtype != object else None, value)
        elif isinstance(value, type) or callable(value) and not _is_ours(value) and not hasattr(value, "__dict__"):
            self.row(path, "type", getattr(value, "__qualname__", type(value).__name__))
        else:
            self.container(value, path, depth)

    def tensor(self, path: str, value: torch.Tensor | None, raw: Any = None) -> None:
        if value is None:
            self.walk(list(raw.ravel()), path + ".values")
            return
        self.row(path, "tensor", (str(value.dtype), tuple(value.shape)))
        kind = "floats" if value.is_floating_point() or value.is_complex() else "ints"  # ints: exact, maybe counts
        self.row(path, kind, tuple(value.ravel().tolist()))

    def container(self, value: Any, path: str, depth: int) -> None:
        if id(value) in self.seen:
            self.row(path, "seen", type(value).__name__)
            return
        self.seen[id(value)] = value
        self.row(path, "type", f"{type(value).__module__}.{type(value).__qualname__}")
        if isinstance(value, Mapping):
            self.row(path, "len", len(value))
            for key in sorted(value, key=repr):
                self.walk(value[key], self.name(path, key), depth + 1)
            return
        if isinstance(value, (list, tuple, set, frozenset)):
            self.row(path, "len", len(value))
            items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
            for i, item in enumerate(items):
                self.walk(item, f"{path}[{i}]", depth + 1)
            return
        if isinstance(value, torch.nn.Module):
            self.walk(dict(value.state_dict()), path + ".state_dict()", depth + 1)
        if not _is_ours(value) and not dataclasses.is_dataclass(value) and not isinstance(value, torch.nn.Module):
            self.text(path + ".repr()", repr(value))
            return
        self.text(path + ".repr()", repr(value))
        self.text(path + ".str()", str(value))
        for attribute in self.attributes(value):
            try:
                item = getattr(value, attribute)
            except Exception as error:  # a property that refuses: its message is an output too
                self.text(self.name(path, attribute) + "!raises", f"{type(error).__name__}: {error}")
                continue
            if attribute in REPORTS and callable(item):
                self.report(item, self.name(path, attribute) + "()", depth)
            elif not callable(item) or _is_ours(item) or isinstance(item, torch.nn.Module):
                self.walk(item, self.name(path, attribute), depth + 1)

    def attributes(self, value: Any) -> list[str]:
        names = set(vars(value)) if hasattr(value, "__dict__") else set()
        if dataclasses.is_dataclass(value):
            names |= {f.name for f in dataclasses.fields(value)}
        names |= {n for n, a in vars(type(value)).items() if isinstance(a, property)}  # public properties
        for klass in type(value).__mro__[1:]:
            if klass.__module__.split(".")[0] == "botorch_dp":
                names |= {n for n, a in vars(klass).items() if isinstance(a, property)}
        names |= {n for n in REPORTS if hasattr(value, n)}
        if isinstance(value, torch.nn.Module):
            names -= {"training", "dump_patches", "call_super_init"}
            names = {n for n in names if n in vars(value) or n in REPORTS or not hasattr(torch.nn.Module, n)}
        return sorted(n for n in names if not n.startswith("_"))

    def report(self, method: Callable[..., Any], path: str, depth: int) -> None:
        name = path.rsplit(".", 1)[-1][:-2]
        try:
            out = method(**REPORT_KWARGS.get(name, {}))
        except TypeError as error:  # needs an argument
            if "argument" not in str(error):
                raise
            self.row(path, "needs-arguments", None)
            return
        self.walk(out, path, depth + 1)


def walk(observation: Observation) -> list[tuple[str, str, Any]]:
    r"""The masked rows ``(path, kind, value)`` of everything the call let a user see."""
    walker = _Walker(_released_words(observation.result))
    walker.walk(observation.result, "result")
    for i, (category, message) in enumerate(observation.warnings):
        walker.row(f"warnings[{i}]", category, mask_text(message, walker.released))
    for i, (level, logger, message) in enumerate(observation.logs):
        walker.row(f"logs[{i}]", f"{level}:{logger}", mask_text(message, walker.released))
    walker.text("stdout", observation.stdout)
    walker.text("stderr", observation.stderr)
    return walker.rows


def _masked(rows: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
    r"""The floats at a released path (``NOISY``) masked; every other float stays exact."""
    return [(p, k, FLOAT) if k in ("float", "floats") and NOISY.search(p) else (p, k, v) for p, k, v in rows]


def assert_same_walk(a: Observation, b: Observation) -> list[tuple[str, str, Any]]:
    r"""Asserts two runs (whose K differ) let a user see the same, after masking the floats, the released
    categorical levels and ids; names the first difference. Returns the rows (for further checks)."""
    rows_a, rows_b = _masked(walk(a)), _masked(walk(b))
    for i, (ra, rb) in enumerate(zip(rows_a, rows_b, strict=False)):
        assert ra == rb, f"the runs differ at {ra[0]} (row {i}):\n  {ra}\n  {rb}"
    assert len(rows_a) == len(rows_b), f"one run shows more: {len(rows_a)} vs {len(rows_b)} rows"
    return rows_a
