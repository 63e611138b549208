r"""A run's release as JSON: what ``DPGIBOResult.to_json`` writes.

Public values only: the release, its ``PrivacyGuarantee`` and the ledger's statement of what
was protected. The NON-PRIVATE diagnostics are added only when asked, under a key that says
so. A run never stores a noise seed, so none can be written. Tensors become nested lists of
floats; a non-finite float becomes the string ``"inf"``, ``"-inf"`` or ``"nan"`` (strict JSON).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from botorch_dp.utils import plain_json

__all__ = ["record_fields", "release_json"]

#: The release's own fields in ``"release"``; each strategy's record adds its values there under the
#: keys its ``json_fields()`` gives (the flat keys of the release before the records, issue 42).
_FIELDS = ("theta", "iterates", "evaluation_points", "batch_sizes", "posterior_traces", "released_gradients")


def record_fields(family: str, record: Any) -> dict[str, Any]:
    r"""What the release's JSON holds of one strategy's ``record``: its ``json_fields()``, or for a
    record without them (a user's strategy) its dataclass fields under the family's name."""
    if callable(fields := getattr(record, "json_fields", None)):
        return dict(fields())
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {family: dataclasses.asdict(record)}
    return {}


def release_json(
    result: Any, path: str | os.PathLike | None = None, *, space: Any = None, include_diagnostics: bool = False
) -> str:
    r"""``result`` (a ``DPGIBOResult``) as JSON text, also written to ``path`` if given.

    With ``space`` (a ``tuning.SearchSpace`` whose ``dim`` is the run's), ``hyperparameters``
    holds the returned ``θ`` in natural units by name and ``natural_iterates`` every iterate.
    """
    release = result.release
    out: dict[str, Any] = {"release": {name: getattr(release, name) for name in _FIELDS}}
    for family, record in release.records.items():
        out["release"].update(record_fields(family, record))
    guarantee = dataclasses.asdict(release.guarantee)
    guarantee["rho"] = release.guarantee.rho
    out["guarantee"] = {
        "this_run": guarantee,
        "ledger": None if result.statement is None else result.statement.to_dict(),
    }
    if space is not None:
        if space.dim != release.theta.shape[-1]:
            raise ValueError(f"space has dim {space.dim}, but the run's theta has d = {release.theta.shape[-1]}.")
        out["hyperparameters"] = space.to_natural(release.theta)
        out["natural_iterates"] = space.to_natural(release.iterates)
    if include_diagnostics and result.diagnostics is not None:
        d = result.diagnostics
        out["NON_PRIVATE_diagnostics"] = {
            "warning": "computed from the sensitive losses without noise: do not publish",
            "unnoised_gradients": d.unnoised_gradients,
            "clip_fractions": d.clip_fractions,
            "noise_norms": d.noise_norms,
        }
    text = json.dumps(plain_json(out), indent=1, allow_nan=False)
    if path is not None:
        Path(path).write_text(text + "\n")
    return text
