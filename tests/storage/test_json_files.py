"""Tests for botorch_dp/storage/json_files.py: a JSON file round-trips exactly, lives in a
private directory, is replaced atomically, and links, foreign directories and damaged files are refused."""

import math
import os

import pytest

from botorch_dp.storage.json_files import load_json, open_private_dir, save_json


def test_a_value_round_trips_exactly_in_a_private_directory(tmp_path):
    directory = tmp_path / "a" / "b"
    value = {"x": [0.1, 1e-300, math.inf], "k": 3, "s": "ü", "none": None}
    assert load_json(directory, "f.json") is None  # missing directory: nothing stored
    save_json(directory, "f.json", value)
    assert load_json(directory, "f.json") == value
    assert os.stat(directory).st_mode & 0o777 == 0o700 and os.stat(directory / "f.json").st_mode & 0o777 == 0o600
    save_json(directory, "f.json", {"x": 2})  # replaced whole
    assert load_json(directory, "f.json") == {"x": 2} and sorted(os.listdir(directory)) == ["f.json"]
    assert load_json(directory, "g.json") is None


def test_links_open_directories_bad_names_and_damaged_files_are_refused(tmp_path):
    root = open_private_dir(tmp_path / "d")
    save_json(root, "real.json", [1])
    os.symlink(root / "real.json", root / "link.json")
    with pytest.raises(ValueError, match="symbolic link"):
        load_json(root, "link.json")
    with pytest.raises(ValueError, match="symbolic link"):
        save_json(root, "link.json", [2])
    assert load_json(root, "real.json") == [1]  # not written through the link
    (root / "bad.json").write_text('{"a": 1, "a": 2}')
    with pytest.raises(ValueError, match="bad.json is not valid JSON: repeated key 'a'"):
        load_json(root, "bad.json")
    with pytest.raises(ValueError, match="name must be a plain file name"):
        save_json(root, "../x.json", 1)
    os.chmod(root, 0o755)
    with pytest.raises(ValueError, match="accessible to group or others"):
        load_json(root, "real.json")
    with pytest.raises(ValueError, match="accessible to group or others"):
        open_private_dir(root)
