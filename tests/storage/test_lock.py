r"""One owner per checkpoint directory (issue 40, item 4): ``storage.lock``.

A ``DPGIBO`` or ``tune`` call that uses a checkpoint directory holds an exclusive ``flock`` on
``owner.lock`` in it for its life; a second opener, in this process or another, is refused
naming the directory and the holder's pid and host. Before, two live processes on one
directory both ran on (each reporting μ 1.0 while 1.2247 was released). The lock file is
created like the other checkpoint files: owner-only, never through a link, a regular file.
"""

from __future__ import annotations

import copy
import gc
import multiprocessing
import os
import pickle
import signal
import socket
import stat
import warnings

import pytest

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.storage.lock import LOCK_FILE, CheckpointInUseError, CheckpointLock
from botorch_dp.tuning.tune_checkpoint import TuneCheckpoint
from tests.optim.loop_helpers import nl_config, normal_location
from tests.privacy import ledger_workers


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def _config():
    return nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=2)


def _one_step(opt):
    _, objective = normal_location(n=10, d=2)
    X = opt.ask()
    opt.tell(X, objective(X))


def test_a_second_opener_in_this_process_is_refused_by_name_until_the_owner_closes(tmp_path):
    root = tmp_path / "ck"
    opt = DPGIBO(_config(), checkpoint_dir=root)  # owns it from construction: created 0700
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    lock_file = root / LOCK_FILE
    assert stat.S_ISREG(lock_file.lstat().st_mode) and stat.S_IMODE(lock_file.stat().st_mode) == 0o600
    _one_step(opt)
    here = f"{root} is in use by a DPGIBO of this process \\({os.getpid()}\\) on host '{socket.gethostname()}'"
    for second in (
        lambda: DPGIBO.resume(root),
        lambda: DPGIBO(_config(), checkpoint_dir=root),
        lambda: CheckpointLock(root, "DPGIBO"),
    ):
        with pytest.raises(CheckpointInUseError, match=here):
            second()
    _one_step(opt)  # the owner goes on
    opt.close()
    opt.close()  # idempotent
    for closed in (opt.ask, lambda: opt.tell(opt.evaluation_points[:1], opt.evaluation_points[:1, :1])):
        with pytest.raises(RuntimeError, match=f"gave up checkpoint directory {root}"):
            closed()
    with DPGIBO.resume(root) as resumed:  # free now; a with block gives it up again
        assert resumed.iteration == 2
        with pytest.raises(CheckpointInUseError):
            DPGIBO.resume(root)
    again = DPGIBO.resume(root)
    del again  # garbage collection gives it up too
    gc.collect()
    assert DPGIBO.resume(root).iteration == 2


def test_a_failed_open_gives_the_directory_back(tmp_path):
    root = tmp_path / "ck"
    DPGIBO(_config(), checkpoint_dir=root).close()  # no checkpoint yet: a fresh directory with a lock file
    _one_step(first := DPGIBO(_config(), checkpoint_dir=root))
    first.close()
    with pytest.raises(ValueError, match=r"already holds a checkpoint"):
        DPGIBO(_config(), checkpoint_dir=root)  # refused after taking the lock: the lock is given back
    with pytest.raises(ValueError, match="num_iterations"):
        import dataclasses

        DPGIBO.resume(root, dataclasses.replace(_config(), num_iterations=9))
    CheckpointLock(root, "DPGIBO").release()  # nobody holds it


def test_the_lock_file_is_never_opened_through_a_link_or_as_something_else(tmp_path):
    root = tmp_path / "ck"
    root.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("not a lock file")
    (root / LOCK_FILE).symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link"):
        DPGIBO(_config(), checkpoint_dir=root)
    assert target.read_text() == "not a lock file"
    (root / LOCK_FILE).unlink()
    os.mkfifo(root / LOCK_FILE, 0o600)  # opening a FIFO must not block, and it is refused
    with pytest.raises(ValueError, match="not a regular file"):
        CheckpointLock(root, "tune")
    (root / LOCK_FILE).unlink()
    (root / LOCK_FILE).write_text("")
    os.chmod(root / LOCK_FILE, 0o644)  # made by hand: made owner-only
    CheckpointLock(root, "tune").release()
    assert stat.S_IMODE((root / LOCK_FILE).stat().st_mode) == 0o600
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    with pytest.raises(ValueError, match="group or others"):
        CheckpointLock(shared, "DPGIBO")
    assert not (shared / LOCK_FILE).exists()


def test_a_lock_is_not_copied_and_a_forked_child_does_not_keep_it(tmp_path):
    lock = CheckpointLock(tmp_path / "ck", "DPGIBO")
    for copier in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(TypeError, match="cannot be copied"):
            copier(lock)
    read, write = os.pipe()
    started_read, started = os.pipe()
    child = os.fork()
    if child == 0:  # the child closed its copy of the lock file at the fork (before any of its code)
        os.close(write)
        os.write(started, b"!")
        os.read(read, 1)
        os._exit(0)
    try:
        os.close(read)
        assert os.read(started_read, 1) == b"!"
        lock.release()
        CheckpointLock(tmp_path / "ck", "DPGIBO").release()  # free while the child lives
    finally:
        os.close(write)
        os.waitpid(child, 0)


def test_a_tune_call_owns_its_directory(tmp_path):
    root = tmp_path / "tune"
    first = TuneCheckpoint(root, {"a": 1})
    assert sorted(p.name for p in root.iterdir()) == [LOCK_FILE, "tune.json"]
    with pytest.raises(CheckpointInUseError, match=f"{root} is in use by a tune of this process"):
        TuneCheckpoint(root, {"a": 1})
    with pytest.raises(CheckpointInUseError):
        DPGIBO(_config(), checkpoint_dir=root)
    first.close()
    with pytest.raises(ValueError, match="other arguments"):
        TuneCheckpoint(root, {"a": 2})  # refused, and the lock given back
    TuneCheckpoint(root, {"a": 1}).close()


def test_a_directory_another_process_owns_is_refused_naming_it_until_that_process_dies(tmp_path):
    root = tmp_path / "ck"
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Event(), ctx.Event()
    owner = ctx.Process(target=ledger_workers.lock_a_directory, args=(str(root), ready, go))
    owner.start()
    try:
        assert ready.wait(timeout=120)
        there = f"{root} is in use by a DPGIBO of process {owner.pid} on host '{socket.gethostname()}'"
        with pytest.raises(CheckpointInUseError, match=there):
            DPGIBO(_config(), checkpoint_dir=root)
        with pytest.raises(CheckpointInUseError, match=there):
            TuneCheckpoint(root, {"a": 1})
    finally:
        os.kill(owner.pid, signal.SIGKILL)  # the process dies, however: the system drops its lock
        owner.join(timeout=60)
    with DPGIBO(_config(), checkpoint_dir=root) as opt:
        _one_step(opt)
