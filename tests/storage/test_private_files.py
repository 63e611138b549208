r"""``storage.private_files``: a private directory opened without following a link, atomic writes
that leave the old file or the new one and nothing else, and reads that refuse links and FIFOs."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from botorch_dp.storage.private_files import lstat, open_dir, read_file, strict_object, write_atomic


def _opened(path):
    fd = open_dir(path, path, create=True)
    assert fd is not None
    return fd


def test_a_created_directory_and_its_parents_exist_and_it_is_owner_only_whatever_the_umask(tmp_path):
    path = tmp_path / "a" / "b"
    assert open_dir(path, path, create=False) is None and not path.exists()
    old = os.umask(0o000)
    try:
        os.close(_opened(path))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_a_link_or_a_directory_open_to_others_is_refused_naming_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ValueError, match="is a symbolic link") as err:
        open_dir(link, link, create=True)
    assert str(link) in str(err.value)
    os.chmod(real, 0o750)
    with pytest.raises(ValueError, match=r"\(mode 0o750\)"):
        open_dir(real, real, create=False)


def test_a_write_is_whole_owner_only_and_reports_its_digest(tmp_path):
    fd = _opened(tmp_path / "d")
    try:
        parts = [b"abc", memoryview(b"defg")]
        record = write_atomic(fd, "f.bin", parts, tmp_path / "d" / "f.bin")
    finally:
        os.close(fd)
    path = tmp_path / "d" / "f.bin"
    assert path.read_bytes() == b"abcdefg"
    assert record == {"sha256": hashlib.sha256(b"abcdefg").hexdigest(), "bytes": 7}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.bin"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    fd = _opened(tmp_path / "d")
    try:
        write_atomic(fd, "f.bin", [b"old"], tmp_path / "d" / "f.bin")

        def crash(_fd):
            raise OSError("disk gone")

        monkeypatch.setattr(os, "fsync", crash)
        with pytest.raises(OSError, match="disk gone"):
            write_atomic(fd, "f.bin", [b"new"], tmp_path / "d" / "f.bin")
    finally:
        os.close(fd)
    assert (tmp_path / "d" / "f.bin").read_bytes() == b"old"
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["f.bin"]


def test_a_new_file_never_replaces_one_and_a_link_at_the_name_is_refused(tmp_path):
    fd = _opened(tmp_path / "d")
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    try:
        write_atomic(fd, "f.bin", [b"first"], tmp_path / "d" / "f.bin")
        with pytest.raises(FileExistsError):
            write_atomic(fd, "f.bin", [b"second"], tmp_path / "d" / "f.bin", replace=False)
        os.symlink(target, "l.bin", dir_fd=fd)
        with pytest.raises(ValueError, match="is a symbolic link"):
            write_atomic(fd, "l.bin", [b"x"], tmp_path / "d" / "l.bin")
    finally:
        os.close(fd)
    assert (tmp_path / "d" / "f.bin").read_bytes() == b"first"
    assert target.read_bytes() == b"keep"
    assert lstat(tmp_path / "d" / "missing", None) is None
    assert stat.S_ISLNK(lstat(tmp_path / "d" / "l.bin", None).st_mode)


def test_a_read_refuses_a_link_and_a_fifo_without_blocking_and_checks_the_size_unread(tmp_path):
    fd = _opened(tmp_path / "d")
    try:
        assert read_file(fd, "missing", tmp_path / "d" / "missing") is None
        write_atomic(fd, "f.bin", [b"12345"], tmp_path / "d" / "f.bin")
        sizes = []
        assert read_file(fd, "f.bin", tmp_path / "d" / "f.bin", check_size=sizes.append) == b"12345"
        assert sizes == [5]
        os.symlink("f.bin", "l.bin", dir_fd=fd)
        with pytest.raises(ValueError, match="is a symbolic link"):
            read_file(fd, "l.bin", tmp_path / "d" / "l.bin")
        os.mkfifo("fifo", dir_fd=fd)
        with pytest.raises(ValueError, match="not a regular file"):
            read_file(fd, "fifo", tmp_path / "d" / "fifo")
    finally:
        os.close(fd)


def test_a_repeated_json_key_is_refused():
    assert json.loads('{"a": 1, "b": 2}', object_pairs_hook=strict_object) == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="repeated key 'a'"):
        json.loads('{"a": 1, "a": 2}', object_pairs_hook=strict_object)
