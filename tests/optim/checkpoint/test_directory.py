r"""``optim.checkpoint.directory``: the checkpoint directory is opened without following a link, is
private to this user, is created owner-only whatever the umask, and a new run refuses one that holds
a checkpoint (``check_new_checkpoint_dir``). ``save_state``/``load_state`` reach it through here."""

from __future__ import annotations

import os
import re
import stat

import pytest
import torch

from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import directory
from botorch_dp.optim.checkpoint.directory import STATE_FILE, check_new_checkpoint_dir
from botorch_dp.optim.checkpoint.files import load_state, save_state
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.storage.lock import CheckpointInUseError
from tests.optim.checkpoint.checkpoint_helpers import contents as _contents
from tests.optim.checkpoint.checkpoint_helpers import run_checkpointed as _run
from tests.optim.checkpoint.test_files import _state
from tests.optim.loop_helpers import nl_config


def test_a_missing_or_empty_directory_is_fine_for_a_new_run_and_nothing_is_created(tmp_path):
    check_new_checkpoint_dir(tmp_path / "missing" / "deeper")
    assert not (tmp_path / "missing").exists()
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    check_new_checkpoint_dir(empty)
    assert not list(empty.iterdir())


@pytest.mark.parametrize("kind", ["file", "empty file", "dangling link", "directory"])
def test_anything_named_state_json_makes_the_directory_taken(tmp_path, kind):
    root = tmp_path / "ck"
    root.mkdir(mode=0o700)
    path = root / STATE_FILE
    if kind == "file":
        path.write_text("{}")
    elif kind == "empty file":
        path.touch()
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "nowhere")
    else:
        path.mkdir()
    with pytest.raises(ValueError, match=re.escape(f"DPGIBO.resume({str(root)!r})")) as err:
        check_new_checkpoint_dir(root)
    assert f"{root} already holds a checkpoint" in str(err.value)


def test_a_symlinked_directory_is_refused_naming_the_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    for attempt in (lambda: check_new_checkpoint_dir(link), lambda: save_state(link, _state(1))):
        with pytest.raises(ValueError, match="is a symbolic link") as err:
            attempt()
        assert str(link) in str(err.value)
    assert not list(real.iterdir())  # nothing was written through the link


def test_a_file_in_place_of_the_directory_is_not_a_directory(tmp_path):
    path = tmp_path / "ck"
    path.write_text("")
    with pytest.raises(NotADirectoryError):
        check_new_checkpoint_dir(path)


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o720, 0o701, 0o770, 0o777])
def test_a_directory_open_to_group_or_others_is_refused_for_read_write_and_new_runs(tmp_path, mode):
    root = tmp_path / "ck"
    save_state(root, _state(1))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    os.chmod(root, mode)
    for attempt in (lambda: check_new_checkpoint_dir(root), lambda: load_state(root)):
        with pytest.raises(ValueError, match=re.escape(f"(mode {oct(mode)})")) as err:
            attempt()
        assert str(root) in str(err.value)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    os.chmod(fresh, mode)
    with pytest.raises(ValueError, match="group or others"):
        save_state(fresh, _state(1))
    assert not list(fresh.iterdir())
    os.chmod(root, 0o700)
    os.chmod(root / "gp", mode)  # the subfolders are checked too
    with pytest.raises(ValueError, match=re.escape(str(root / "gp"))):
        load_state(root)
    os.chmod(root / "gp", 0o700)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert load_state(root)["meta"]["iteration"] == 1


def test_a_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "ck"
    save_state(root, _state(1))
    owner = os.geteuid()
    monkeypatch.setattr(directory.os, "geteuid", lambda: owner + 54321)  # as another user sees it
    for attempt in (lambda: check_new_checkpoint_dir(root), lambda: load_state(root)):
        with pytest.raises(ValueError, match=f"owned by user {owner}, not by this user \\({owner + 54321}\\)") as err:
            attempt()
        assert str(root) in str(err.value)
    monkeypatch.undo()
    assert load_state(root)["meta"]["iteration"] == 1


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_created_folders_are_owner_only_whatever_the_umask_and_parents_are_made(tmp_path, umask):
    root = tmp_path / "a" / "b" / "ck"
    old = os.umask(umask)
    try:
        save_state(root, _state(1))
    finally:
        os.umask(old)
    for path in (root, root / "gp", root / "losses"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert torch.equal(load_state(root)["loss_blocks"][0], _state(1)["loss_blocks"][0])


# ---------------------------------------- through DPGIBO (moved from tests/optim/test_checkpoint_files.py)
def test_a_new_run_refuses_a_directory_that_holds_a_checkpoint(tmp_path):
    root = tmp_path / "ck"
    opt, cfg, _ = _run(root)
    before = _contents(root)
    with pytest.raises(CheckpointInUseError, match=f"{root} is in use by a DPGIBO of this process"):  # opt owns it
        DPGIBO(cfg, checkpoint_dir=root)
    opt.close()
    with pytest.raises(ValueError, match=r"DPGIBO\.resume") as err:
        DPGIBO(cfg, checkpoint_dir=root)
    assert str(root) in str(err.value)
    assert _contents(root) == before  # the checkpoint and its ledger are untouched
    resumed = DPGIBO.resume(root)  # resume itself is not refused
    assert resumed.iteration == 2 and resumed.run_id == opt.run_id and len(resumed.ledger.validation.steps()) == 2
    # an empty directory and a missing one are fine
    (tmp_path / "empty").mkdir(mode=0o700)
    DPGIBO(cfg, checkpoint_dir=tmp_path / "empty").ask()
    DPGIBO(cfg, checkpoint_dir=tmp_path / "missing" / "ck").ask()
    assert (tmp_path / "empty" / ckpt.STATE_FILE).is_file() and (
        tmp_path / "missing" / "ck" / ckpt.STATE_FILE
    ).is_file()


def test_a_new_run_refuses_a_symlinked_directory(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ValueError, match="symbolic link") as err:
        DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=6), checkpoint_dir=link)
    assert str(link) in str(err.value) and not list(real.iterdir())


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o720, 0o701])
def test_a_checkpoint_directory_open_to_others_is_refused(tmp_path, mode):
    root = tmp_path / "ck"
    opt, cfg, _ = _run(root, iterations=1)
    os.chmod(root, mode)
    before = _contents(root)
    for attempt in (lambda: DPGIBO.resume(root), opt.ask, lambda: DPGIBO(cfg, checkpoint_dir=root)):
        with pytest.raises(ValueError, match=re.escape(oct(mode))) as err:
            attempt()
        assert str(root) in str(err.value)
    assert _contents(root) == before and opt.state.pending is None
    os.chmod(root, 0o700)
    opt.close()
    assert DPGIBO.resume(root).iteration == 1
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    with pytest.raises(ValueError, match="group or others"):  # an existing, empty one too
        DPGIBO(cfg, checkpoint_dir=shared)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="changing a directory's owner needs root")
def test_a_checkpoint_directory_of_another_user_is_refused(tmp_path):
    root = tmp_path / "ck"
    opt, cfg, _ = _run(root, iterations=1)
    os.chown(root, 54321, -1)
    for attempt in (lambda: DPGIBO.resume(root), opt.ask, lambda: DPGIBO(cfg, checkpoint_dir=root)):
        with pytest.raises(ValueError, match="owned by user 54321") as err:
            attempt()
        assert str(root) in str(err.value)
    os.chown(root, os.geteuid(), -1)
    opt.close()
    assert DPGIBO.resume(root).iteration == 1
