"""sweepcore.files: a named file that cannot be read is one line naming it and why; only regular
files are read, and a path confined to data roots stays inside them."""

import os

import pytest

from sweepcore.files import FileProblem, open_bytes, read_bytes, read_text, within_roots


def test_a_missing_file_a_folder_and_a_binary_file_each_say_what_is_wrong(tmp_path):
    with pytest.raises(FileProblem, match=r"nope\.yaml: no such file$"):
        read_text(tmp_path / "nope.yaml", "a sweep file", 100)
    with pytest.raises(FileProblem, match=r": is a directory, not a result file$"):
        read_bytes(tmp_path, "a result file", 100)
    binary = tmp_path / "x.yaml"
    binary.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(FileProblem, match=r"x\.yaml: not a UTF-8 text file$"):
        read_text(binary, "a sweep file", 100)
    assert read_bytes(binary, "a result file", 100) == b"\xff\xfe\x00name"



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


def test_a_device_or_a_fifo_is_refused_before_a_byte_is_read(tmp_path):
    with pytest.raises(FileProblem, match=r"^/dev/zero: not a regular file \(a device, FIFO or socket\), not a data set$"):
        open_bytes("/dev/zero", "a data set", 100)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # nothing writes to it: a blocking open would hang here
    with pytest.raises(FileProblem, match=r"pipe: not a regular file"):
        read_bytes(fifo, "a data set", 100)


def test_a_path_outside_the_data_roots_is_refused_alike_whether_it_exists_or_not(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.json").write_text("[]")
    (root / "ok.json").write_text("[]")
    (root / "escape").symlink_to(outside / "secret.json")
    (root / "gone").symlink_to(outside / "missing.json")
    messages = set()
    for path in (outside / "secret.json", outside / "missing.json", root / "escape", root / "gone",
                 f"{root}/../outside/secret.json", "relative.json", "/dev/zero"):
        with pytest.raises(FileProblem) as refused:
            open_bytes(path, "a data set", 100, roots=[root])
        messages.add(str(refused.value).removeprefix(f"{path}: "))
    assert messages == {f"outside this host's data roots ({root}); an admin sets a host's data roots, or makes "
                        f"the workload"}
    with pytest.raises(FileProblem, match=r"none are set"):
        open_bytes(root / "ok.json", "a data set", 100, roots=[])
    with open_bytes(root / "ok.json", "a data set", 100, roots=[root]) as f:
        assert f.read() == b"[]"
    with pytest.raises(FileProblem, match=r"nope\.json: no such file$"):  # inside a root, it may say so
        open_bytes(root / "nope.json", "a data set", 100, roots=[root])


def test_within_roots_checks_the_text_alone_when_asked_not_to_resolve(tmp_path):
    (tmp_path / "link").symlink_to("/etc")
    assert within_roots("/data/sets/a.json", ["/data/sets"], resolve=False)
    assert within_roots("/data/sets", ["/data/sets/"], resolve=False)
    assert not within_roots("/data/sets/../other/a.json", ["/data/sets"], resolve=False)
    assert not within_roots("/data/setsx/a.json", ["/data/sets"], resolve=False)
    assert not within_roots("sets/a.json", ["/data/sets", "sets"], resolve=False)
    assert within_roots(tmp_path / "link" / "passwd", [tmp_path], resolve=False)
    assert not within_roots(tmp_path / "link" / "passwd", [tmp_path])
