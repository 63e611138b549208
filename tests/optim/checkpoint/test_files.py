r"""``optim.checkpoint.files``: ``save_state``/``load_state`` on a synthetic state, without a run.

Properties: a save reads back bit for bit; every file is owner-only; nothing is pickled (JSON and
safetensors, read without ``torch.load``/``pickle``); every read is validated (size, SHA-256, format,
fingerprint, repeated keys, finiteness, shapes); a write is durable before it is released (the file
is fsync'd before the rename, the directory after) and atomic (a crash between the write and the
rename leaves the old file and no temporary); nothing is read or written through a symbolic link.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import shutil
import stat
from pathlib import Path

import pytest
import torch

from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import files
from botorch_dp.optim.checkpoint.directory import FORMAT, SCHEMA_VERSION, STATE_FILE
from botorch_dp.optim.checkpoint.encoding import json_fingerprint
from botorch_dp.optim.checkpoint.files import load_state, save_state
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.storage.lock import CheckpointInUseError
from tests.optim.checkpoint.checkpoint_helpers import contents as _contents
from tests.optim.checkpoint.checkpoint_helpers import run_checkpointed as _run
from tests.optim.loop_helpers import nl_config

CONFIG = {"privacy_mu": 1.0, "num_iterations": 6, "seed": 5}


def _state(iteration: int, *, users: int = 5, rows: int = 2, d: int = 3, seed: int = 0) -> dict:
    r"""A state of ``iteration`` finished batches of ``rows`` points over ``users`` users."""
    g = torch.Generator().manual_seed(seed)
    n = iteration * rows
    blocks = [torch.randn(rows, users, generator=g, dtype=torch.float64) for _ in range(iteration)]
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    gp = {"X": torch.rand(n, d, generator=g, dtype=torch.float64), "L": A.tril()}
    meta = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "iteration": iteration,
        "config": CONFIG,
        "config_fingerprint": json_fingerprint(CONFIG),
        "note": "public",
    }
    return {"meta": meta, "gp": gp, "loss_blocks": blocks}


def _equal(a: dict, b: dict) -> bool:
    return (
        a["meta"] == b["meta"]
        and a["gp"].keys() == b["gp"].keys()
        and all(torch.equal(a["gp"][k], b["gp"][k]) and b["gp"][k].dtype == torch.float64 for k in a["gp"])
        and len(a["loss_blocks"]) == len(b["loss_blocks"])
        and all(torch.equal(x, y) for x, y in zip(a["loss_blocks"], b["loss_blocks"], strict=True))
    )


def _saved(tmp_path: Path, iteration: int = 2) -> tuple[Path, dict, dict]:
    root = tmp_path / "ck"
    state = _state(iteration)
    committed = save_state(root, state)
    return root, state, committed


def _document(root: Path) -> dict:
    return json.loads((root / STATE_FILE).read_text("utf-8"))


def _rewrite(root: Path, document: dict) -> None:
    (root / STATE_FILE).write_text(json.dumps(document), "utf-8")


# ---------------------------------------------------------------------- round trip, layout, permissions
def test_a_saved_state_reads_back_bit_for_bit(tmp_path):
    root, state, committed = _saved(tmp_path, iteration=3)
    loaded = load_state(root)
    assert _equal(state, loaded)
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert names == ["gp/000003.safetensors", *(f"losses/{t:06d}.safetensors" for t in range(3)), STATE_FILE]
    # the records name each file with its true size and SHA-256 (recomputed here)
    for record in [committed["gp_file"], *committed["loss_files"]]:
        data = (root / record["file"]).read_bytes()
        assert record["bytes"] == len(data) and record["sha256"] == hashlib.sha256(data).hexdigest()
    assert [r["rows"] for r in committed["loss_files"]] == [2, 2, 2]


def test_every_file_and_folder_is_owner_only_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        root, _, _ = _saved(tmp_path)
    finally:
        os.umask(old)
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_nothing_is_pickled_and_nothing_is_unpickled(tmp_path, monkeypatch):
    root, state, _ = _saved(tmp_path)
    for path in (root / "gp").iterdir():
        data = path.read_bytes()
        size = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + size])  # the safetensors layout: length, JSON header, raw data
        assert header["__metadata__"] == {"format": FORMAT}
        assert {k: v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"X": "F64", "L": "F64"}
        raw = torch.frombuffer(bytearray(data[8 + size :]), dtype=torch.float64)  # little-endian float64
        assert torch.equal(raw, torch.cat([state["gp"]["L"].flatten(), state["gp"]["X"].flatten()]))
    json.loads((root / STATE_FILE).read_bytes())

    def refuse(*args, **kwargs):
        raise AssertionError("a checkpoint read must not unpickle")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    assert _equal(state, load_state(root))


def test_only_float64_tensors_are_written(tmp_path):
    state = _state(1)
    state["gp"]["X"] = state["gp"]["X"].float()
    with pytest.raises(ValueError, match="'X' must be float64"):
        save_state(tmp_path / "ck", state)


# ---------------------------------------------------------------------- saving again
def test_a_later_save_writes_only_new_files_and_removes_what_is_not_named(tmp_path):
    root, _, committed = _saved(tmp_path, iteration=2)
    before = {p.name: p.stat().st_ino for p in (root / "losses").iterdir()}
    later = _state(3)
    later["loss_blocks"][:2] = _state(2)["loss_blocks"]  # the run's first two blocks are the same
    stray = root / "state.json.0123456789abcdef.tmp"
    stray.write_bytes(b"left by a crash")
    committed = save_state(root, later, committed)
    after = {p.name: p.stat().st_ino for p in (root / "losses").iterdir()}
    assert {k: after[k] for k in before} == before  # the old loss files were not written again
    assert sorted(after) == [f"{t:06d}.safetensors" for t in range(3)]
    assert [p.name for p in (root / "gp").iterdir()] == ["000003.safetensors"]  # the old gp file is gone
    assert not stray.exists()
    assert _equal(later, load_state(root))


def test_a_first_save_never_replaces_a_checkpoint(tmp_path):
    root, state, _ = _saved(tmp_path)
    before = (root / STATE_FILE).read_bytes()
    with pytest.raises(ValueError, match=r"already holds a checkpoint.*DPGIBO\.resume"):
        save_state(root, _state(1, seed=9))
    assert (root / STATE_FILE).read_bytes() == before and _equal(state, load_state(root))


# ---------------------------------------------------------------------- durable and atomic
def test_each_file_is_synced_before_its_rename_and_the_folder_after(tmp_path, monkeypatch):
    events: list[tuple[str, object]] = []
    real_fsync, real_replace, real_link = os.fsync, os.replace, os.link

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync-dir" if stat.S_ISDIR(st.st_mode) else "fsync-file", st.st_ino))
        real_fsync(fd)

    def replace(src, dst, **kw):
        events.append(("rename", dst))
        real_replace(src, dst, **kw)

    def link(src, dst, **kw):
        events.append(("rename", dst))
        real_link(src, dst, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "link", link)
    root, _, _ = _saved(tmp_path, iteration=1)
    kinds = [kind for kind, _ in events]
    # three files (loss, gp, state.json): each one fsync'd, then renamed into place, then its folder fsync'd
    assert kinds == ["fsync-file", "rename", "fsync-dir"] * 3
    assert [dst for kind, dst in events if kind == "rename"] == ["000000.safetensors", "000001.safetensors", STATE_FILE]
    assert events[-1] == ("fsync-dir", root.stat().st_ino)  # the commit point is durable


@pytest.mark.parametrize("step", ["rename", "fsync"])
def test_a_crash_between_write_and_rename_leaves_the_old_checkpoint(tmp_path, monkeypatch, step):
    root, state, committed = _saved(tmp_path, iteration=2)
    before = (root / STATE_FILE).read_bytes()
    later = _state(3)
    later["loss_blocks"][:2] = state["loss_blocks"]
    new_size = len(_json_of(root, later))

    class Crash(BaseException):
        pass

    real_fsync = os.fsync

    def crash(*args, **kwargs):
        raise Crash

    def crash_on_state_fsync(fd):  # the new state.json is written but not yet synced or renamed
        if not stat.S_ISDIR(os.fstat(fd).st_mode) and os.fstat(fd).st_size == new_size:
            raise Crash
        real_fsync(fd)

    if step == "rename":
        monkeypatch.setattr(os, "replace", crash)
    else:
        monkeypatch.setattr(os, "fsync", crash_on_state_fsync)
    with pytest.raises(Crash):
        save_state(root, later, committed)
    monkeypatch.undo()
    assert (root / STATE_FILE).read_bytes() == before
    assert not list(root.glob("*.tmp")) and not list(root.glob("*/*.tmp"))  # the temporary was removed
    assert _equal(state, load_state(root))  # the new gp/loss files are not named: the old state reads


def _json_of(root: Path, state: dict) -> bytes:
    r"""The bytes of the ``state.json`` that saving ``state`` over the checkpoint at ``root`` writes."""
    scratch = root.parent / "scratch"
    save_state(scratch, state)
    return (scratch / STATE_FILE).read_bytes()


# ---------------------------------------------------------------------- validated reads
def _flip_byte(path: Path, at: int = -1) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["gp/000002.safetensors", "losses/000001.safetensors"])
def test_a_damaged_file_is_refused_by_its_sha256_and_a_resized_one_by_its_size(tmp_path, name):
    root, _, _ = _saved(tmp_path)
    _flip_byte(root / name)
    with pytest.raises(ValueError, match=f"{name} does not match its SHA-256"):
        load_state(root)
    (root / name).write_bytes((root / name).read_bytes() + b"\0" * 8)
    with pytest.raises(ValueError, match=f"{name} has the wrong size"):
        load_state(root)
    (root / name).unlink()
    with pytest.raises(ValueError, match=f"{name} is missing"):
        load_state(root)


def test_state_json_is_checked_field_by_field(tmp_path):
    root, _, _ = _saved(tmp_path)
    good = _document(root)
    cases = {
        "not a DP-GIBO checkpoint": {**good, "format": "other"},
        "'schema_version' is 2": {**good, "schema_version": 2},
        "'iteration' must be an integer": {**good, "iteration": 1.5},
        "'config_fingerprint' does not match": {**good, "config": {**CONFIG, "privacy_mu": 9.0}},
        "one loss file per iteration": {**good, "loss_files": good["loss_files"][:1]},
        r"expected losses/000000\.safetensors": {**good, "loss_files": good["loss_files"][::-1]},
        "bad file name": {**good, "gp_file": {**good["gp_file"], "file": "../gp/000002.safetensors"}},
    }
    for message, document in cases.items():
        _rewrite(root, document)
        with pytest.raises(ValueError, match=message):
            load_state(root)
    (root / STATE_FILE).write_text(json.dumps(good)[:-5], "utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_state(root)
    text = json.dumps(good)
    (root / STATE_FILE).write_text(text[:-1] + ', "note": "again"}', "utf-8")
    with pytest.raises(ValueError, match="repeated key 'note'"):
        load_state(root)
    _rewrite(root, good)
    assert load_state(root)["meta"]["note"] == "public"


def test_a_non_finite_or_misshapen_tensor_is_refused(tmp_path):
    state = _state(2)
    state["loss_blocks"][1][0, 0] = float("nan")
    save_state(tmp_path / "nan", state)
    with pytest.raises(ValueError, match="'losses' is not finite"):
        load_state(tmp_path / "nan")
    state = _state(2)
    state["gp"]["L"] = state["gp"]["L"][:-1]
    save_state(tmp_path / "shape", state)
    with pytest.raises(ValueError, match=r"X \(N x d\) and L \(N x N\) with N = 4"):
        load_state(tmp_path / "shape")
    state = _state(2)
    state["loss_blocks"][1] = torch.zeros(2, 6, dtype=torch.float64)
    save_state(tmp_path / "users", state)
    with pytest.raises(ValueError, match="has 6 users, earlier batches 5"):
        load_state(tmp_path / "users")
    state = _state(2)
    state["gp"]["secret"] = torch.zeros(1, dtype=torch.float64)
    save_state(tmp_path / "extra", state)
    with pytest.raises(ValueError, match=r"unknown tensors \['secret'\]"):
        load_state(tmp_path / "extra")


def test_an_oversized_state_json_is_refused_unread(tmp_path, monkeypatch):
    root, _, _ = _saved(tmp_path)
    size = (root / STATE_FILE).stat().st_size
    monkeypatch.setattr(files, "MAX_STATE_BYTES", size - 1)
    with pytest.raises(ValueError, match=f"larger than {size - 1} bytes"):
        load_state(root)
    monkeypatch.setattr(files, "MAX_STATE_BYTES", size)
    load_state(root)


# ---------------------------------------------------------------------- never through a link
@pytest.mark.parametrize("name", [STATE_FILE, "gp/000003.safetensors", "losses/000002.safetensors"])
def test_a_symlink_at_a_name_being_written_is_refused_and_its_target_untouched(tmp_path, name):
    root, state, committed = _saved(tmp_path)
    target = tmp_path / "outside"
    target.write_text("not the checkpoint's")
    if (root / name).exists():
        (root / name).unlink()
    (root / name).symlink_to(target)
    later = _state(3)
    later["loss_blocks"][:2] = state["loss_blocks"]
    with pytest.raises(ValueError, match="symbolic link") as err:
        save_state(root, later, committed)
    assert str(root / name) in str(err.value)
    assert target.read_text() == "not the checkpoint's"
    assert not list(root.glob("*.tmp")) and not list(root.glob("*/*.tmp"))


def test_a_fifo_in_place_of_a_file_is_refused_without_blocking(tmp_path):
    root, _, _ = _saved(tmp_path)
    (root / "losses" / "000000.safetensors").unlink()
    os.mkfifo(root / "losses" / "000000.safetensors", 0o600)
    with pytest.raises(ValueError, match="not a regular file"):
        load_state(root)


# ---------------------------------------- through DPGIBO (moved from tests/optim/test_checkpoint_files.py)
def test_a_checkpoint_committed_after_construction_is_not_replaced(tmp_path):
    root = tmp_path / "ck"
    late = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=6, seed=5), checkpoint_dir=root)  # no checkpoint yet
    with pytest.raises(CheckpointInUseError):  # another run is refused the directory late owns ...
        _run(root)
    _run(tmp_path / "other")[0].close()
    shutil.copytree(tmp_path / "other", root, dirs_exist_ok=True)  # ... but a copy that ignores the lock lands
    before = _contents(root)
    with pytest.raises(ValueError, match=r"DPGIBO\.resume"):
        late.ask()  # its first save
    assert _contents(root) == before and late.iteration == 0 and late.state.pending is None
    late.close()
    assert DPGIBO.resume(root).iteration == 2


def test_the_first_save_works_where_hard_links_do_not(tmp_path, monkeypatch):
    r"""A file system without hard links: the first commit checks, then renames."""

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    opt, cfg, _ = _run(tmp_path / "ck", iterations=1)
    opt.close()
    assert DPGIBO.resume(tmp_path / "ck").iteration == 1 and not list((tmp_path / "ck").rglob("*.tmp"))
    late = DPGIBO(cfg, checkpoint_dir=tmp_path / "other")
    _run(tmp_path / "elsewhere")[0].close()
    shutil.copytree(tmp_path / "elsewhere", tmp_path / "other", dirs_exist_ok=True)  # lands while late owns it
    with pytest.raises(ValueError, match=r"DPGIBO\.resume"):
        late.ask()
    assert not list((tmp_path / "other").rglob("*.tmp"))


def test_symlinks_planted_at_the_old_temporary_names_are_not_followed(tmp_path):
    root = tmp_path / "ck"
    opt, _, objective = _run(root, iterations=1)
    outside = {
        name: tmp_path / f"outside-{i}"
        for i, name in enumerate(["state.json.tmp", "gp/000002.safetensors.tmp", "losses/000001.safetensors.tmp"])
    }
    for name, target in outside.items():
        target.write_text("not the checkpoint's")
        (root / name).symlink_to(target)
    X = opt.ask()
    opt.tell(X, objective(X))  # writes state.json, gp/000002 and losses/000001
    assert all(target.read_text() == "not the checkpoint's" for target in outside.values())
    assert not (root / ckpt.STATE_FILE).is_symlink()
    opt.close()
    assert DPGIBO.resume(root).iteration == 2
    assert not [p for p in root.rglob("*.tmp") if not p.is_symlink()]  # no temporaries of ours left


@pytest.mark.parametrize(
    "name", ["", "state.json", "gp", "losses", "gp/000002.safetensors", "losses/000001.safetensors"]
)
def test_a_symlinked_part_of_a_checkpoint_is_refused_on_read(tmp_path, name):
    root = tmp_path / "ck"
    _run(root)
    path = root / name if name else root
    aside = tmp_path / "aside"
    path.rename(aside)
    path.symlink_to(aside)
    with pytest.raises(ValueError, match="symbolic link") as err:
        DPGIBO.resume(root)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("name", ["", "state.json", "gp", "losses"])
def test_a_symlinked_part_of_a_checkpoint_is_refused_on_write(tmp_path, name):
    root = tmp_path / "ck"
    opt, _, objective = _run(root, iterations=1)
    path = root / name if name else root
    aside = tmp_path / "aside"
    path.rename(aside)
    path.symlink_to(aside)
    before = _contents(aside) if aside.is_dir() else aside.read_bytes()
    with pytest.raises(ValueError, match="symbolic link") as err:
        opt.ask()
    assert str(path) in str(err.value)
    assert (_contents(aside) if aside.is_dir() else aside.read_bytes()) == before
    assert opt.state.pending is None  # the failed ask left no trace


@pytest.mark.parametrize("name", ["gp/000002.safetensors", "losses/000001.safetensors"])
def test_a_symlink_at_the_name_of_a_new_file_is_refused(tmp_path, name):
    root = tmp_path / "ck"
    opt, _, objective = _run(root, iterations=1)
    X = opt.ask()
    target = tmp_path / "outside"
    target.write_text("not the checkpoint's")
    (root / name).symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link") as err:
        opt.tell(X, objective(X))
    assert str(root / name) in str(err.value)
    assert target.read_text() == "not the checkpoint's" and opt.iteration == 1
    (root / name).unlink()
    opt.tell(X, objective(X))  # the retry releases once
    opt.close()
    assert DPGIBO.resume(root).iteration == 2
