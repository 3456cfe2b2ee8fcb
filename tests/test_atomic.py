"""atomic: a file is there whole or not at all, even when the writer fails half-way."""

import pytest

from dreamer_live.atomic import atomic_path, is_temporary, write_atomic


def test_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "file.bin"
    write_atomic(path, b"old")
    write_atomic(path, b"new contents")
    assert path.read_bytes() == b"new contents"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


def test_a_failing_writer_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    path = tmp_path / "file.bin"
    write_atomic(path, b"old")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            assert is_temporary(tmp) and not is_temporary(path)
            tmp.write_bytes(b"half")
            raise RuntimeError("crash mid-write")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


def test_a_missing_folder_is_made_again(tmp_path):
    """A folder deleted during a run (DIR/params, DIR/replay) comes back at the next write into it."""
    path = tmp_path / "params" / "latest.json"
    write_atomic(path, b"{}")
    path.unlink()
    path.parent.rmdir()
    write_atomic(path, b"{}")
    assert path.read_bytes() == b"{}"
