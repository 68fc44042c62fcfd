"""sweepcore.files: a named file that cannot be read is one line naming it and why."""

import pytest

from sweepcore.files import FileProblem, read_bytes, read_text


def test_a_missing_file_a_folder_and_a_binary_file_each_say_what_is_wrong(tmp_path):
    with pytest.raises(FileProblem, match=r"nope\.yaml: no such file$"):
        read_text(tmp_path / "nope.yaml", "a sweep file")
    with pytest.raises(FileProblem, match=r": is a directory, not a result file$"):
        read_bytes(tmp_path, "a result file")
    binary = tmp_path / "x.yaml"
    binary.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(FileProblem, match=r"x\.yaml: not a UTF-8 text file$"):
        read_text(binary, "a sweep file")
    assert read_bytes(binary, "a result file") == b"\xff\xfe\x00name"

