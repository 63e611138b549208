r"""A resumable record of finished benchmark jobs: one JSON line per ``Run``, fsynced.

``RunStore(path, header)`` opens (or creates) a JSON-lines file whose first line is the
``header`` (the experiment's name, settings and public context). Each later line holds one
finished job: its key and its ``Run``. A job's key hashes the header, the job's kind and its
resolved keyword arguments, so a run is only reused by the same job of the same
experiment with the same settings. Opening a file whose header differs from ``header``
raises ``ValueError`` naming the differing fields (resume with the settings the file was
made with, or start a fresh output directory): a benchmark never mixes runs made under
different settings. One difference is not one: a settings field added to the code after
the file was written, at its default value (``added_field_defaults``), since an added field's
default keeps the behaviour the file's runs were made with; the file's header and keys are
then kept.

Every line is flushed and fsynced before ``add`` returns, so a run that finished is never
lost to a crash or a kill; a final line cut short by one (no trailing newline, or not
valid JSON) is dropped on opening and that job runs again.

Benchmarks record only NON-PRIVATE diagnostics of public or synthetic problems (losses
of what a method returned) and never a noise seed; the file is written with the
default permissions of its directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from benchmarks.runs import Run

__all__ = ["RunStore", "canonical_json"]

FORMAT = "botorch-dp-runs/1"


def canonical_json(value: Any) -> str:
    r"""``value`` as compact JSON with sorted keys (tuples as lists, ``inf`` as ``Infinity``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _normalised(value: Any) -> Any:
    r"""``value`` as it reads back from JSON (tuples become lists)."""
    return json.loads(canonical_json(value))


class RunStore:
    r"""Finished runs of one experiment, kept in a JSON-lines file, keyed by job.

    Args:
        path: The file (created with its parent directories if missing).
        header: JSON-ready description of what the runs depend on besides each job's
            arguments: the experiment's name, its settings (under ``"settings"``) and its
            public context.
        added_field_defaults: The default value of every settings field: a field the
            file's header lacks is accepted when ``header`` gives it this value.

    Raises:
        ValueError: If the file exists with another header, or is not a run store.
    """

    def __init__(self, path: str | os.PathLike, header: dict, *, added_field_defaults: dict | None = None) -> None:
        self.path = Path(path)
        self.header = {"format": FORMAT, **_normalised(header)}
        self._defaults = _normalised(added_field_defaults or {})
        self._digest = hashlib.sha256(canonical_json(self.header).encode()).hexdigest()
        self._runs: dict[str, Run] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._append(self.header)

    def _load(self) -> None:
        lines = self.path.read_text().split("\n")
        try:
            stored = json.loads(lines[0])
        except json.JSONDecodeError as error:
            raise ValueError(f"{self.path} is not a run store (first line is not JSON)") from error
        if not isinstance(stored, dict) or stored.get("format") != FORMAT:
            raise ValueError(f"{self.path} is not a run store of format {FORMAT!r}")
        if stored != self.header:
            if not self._only_added_defaults(stored):
                raise ValueError(self._difference(stored))
            self.header = stored  # the same experiment: keep the file's header and its keys
            self._digest = hashlib.sha256(canonical_json(stored).encode()).hexdigest()
        complete, tail = lines[1:-1], lines[-1]  # a file written by add() ends with a newline
        for i, line in enumerate(complete):
            try:
                record = json.loads(line)
                self._runs[record["key"]] = Run(**record["run"])
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{self.path}, line {i + 2}: not a stored run ({error})") from error
        if tail:  # the last write was cut short: drop it (that job runs again)
            with open(self.path, "r+", encoding="utf-8") as f:
                f.truncate(self.path.stat().st_size - len(tail.encode()))

    def _only_added_defaults(self, stored: dict) -> bool:
        r"""Whether ``stored`` is this header less settings fields that are at their defaults here."""
        settings, old = self.header.get("settings"), stored.get("settings")
        if not isinstance(settings, dict) or not isinstance(old, dict) or not set(old) <= set(settings):
            return False
        added = set(settings) - set(old)
        if not added or any(k not in self._defaults or settings[k] != self._defaults[k] for k in added):
            return False
        return {**self.header, "settings": {k: v for k, v in settings.items() if k in old}} == stored

    def _difference(self, stored: dict) -> str:
        keys = sorted(set(stored) | set(self.header))
        changed = [k for k in keys if stored.get(k) != self.header.get(k)]
        details = []
        for k in changed:
            old, new = stored.get(k), self.header.get(k)
            if isinstance(old, dict) and isinstance(new, dict):
                fields = sorted(f for f in set(old) | set(new) if old.get(f) != new.get(f))
                details.append(f"{k}: {', '.join(f'{f} (stored {old.get(f)!r}, now {new.get(f)!r})' for f in fields)}")
            else:
                details.append(f"{k} (stored {old!r}, now {new!r})")
        return (
            f"{self.path} holds runs made with other settings ({'; '.join(details)}). Resume with the "
            "settings it was made with, or write to a fresh output directory (--fresh discards it)."
        )

    def _append(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(canonical_json(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def key(self, kind: str, kwargs: dict) -> str:
        r"""The key of the job ``kind(**kwargs)`` under this store's header."""
        body = canonical_json({"header": self._digest, "kind": kind, "kwargs": _normalised(kwargs)})
        return hashlib.sha256(body.encode()).hexdigest()

    def get(self, key: str) -> Run | None:
        r"""The stored run of ``key``, or ``None``."""
        return self._runs.get(key)

    def add(self, key: str, run: Run) -> None:
        r"""Record ``run`` under ``key`` durably (flushed and fsynced before returning)."""
        self._append({"key": key, "run": dataclasses.asdict(run)})
        self._runs[key] = run

    def __len__(self) -> int:
        return len(self._runs)
