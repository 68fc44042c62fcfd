"""sweepcore.files: a named file that cannot be read is one line naming it and why."""

import pytest

from sweepcore.files import FileProblem, open_bytes, read_bytes, read_text


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



def test_a_file_opened_to_be_streamed_is_refused_as_a_read_one_is(tmp_path):
    with pytest.raises(FileProblem, match=r"nope\.json: no such file$"):
        open_bytes(tmp_path / "nope.json", "a result file", 100)
    with pytest.raises(FileProblem, match=r": is a directory, not a result file$"):
        open_bytes(tmp_path, "a result file", 100)
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 101)
    with pytest.raises(FileProblem, match=r"big\.json: more than 100 bytes; a result file may be up to 100 bytes "
                                          r"\(Sweeplab's limit\)$"):
        open_bytes(big, "a result file", 100)
    with open_bytes(big, "a result file", 101) as f:
        assert f.read(5) == b"xxxxx"
