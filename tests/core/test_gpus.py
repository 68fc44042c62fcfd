"""sweepcore.gpus: which free GPUs a run takes, CUDA_VISIBLE_DEVICES, lease overlaps."""

import pytest

from sweepcore import gpus
from sweepcore.gpus import aligned_blocks, choose, overlapping_leases, parse_visible_devices, visible_devices


def test_a_hosts_gpus_are_said_in_words_with_plurals():
    assert [gpus.gpus_text(n) for n in (0, 1, 8)] == ["no GPUs", "1 GPU", "8 GPUs"]
    assert gpus.host_text(0) == gpus.host_text(0, "") == "CPU host, no GPUs"
    assert gpus.host_text(8, "NVIDIA H200") == "8 × NVIDIA H200"
    assert gpus.host_text(1) == "1 GPU"  # no model recorded


def test_aligned_blocks_round_up_to_a_power_of_two():
    assert aligned_blocks(8, 4) == [frozenset(range(4)), frozenset(range(4, 8))]
    assert aligned_blocks(8, 3) == aligned_blocks(8, 4)
    assert aligned_blocks(4, 8) == []


def test_an_empty_host_gives_each_tp_its_aligned_block():
    assert choose(range(8), 8, 8) == list(range(8))
    assert choose(range(8), 4, 8) == [0, 1, 2, 3]
    assert choose(range(8), 2, 8) == [0, 1]
    assert choose(range(8), 1, 8) == [0]


def test_small_runs_fill_a_started_block_before_breaking_a_whole_one():
    # GPU 0 is taken: the next TP1 goes to 1 (same pair), then 2-3 before 4-7 is touched.
    assert choose([1, 2, 3, 4, 5, 6, 7], 1, 8) == [1]
    assert choose([2, 3, 4, 5, 6, 7], 1, 8) == [2]
    # A TP1 on GPU 5 leaves 0-3 whole for a TP4: the TP2 goes beside it, to 6-7.
    assert choose([0, 1, 2, 3, 4, 6, 7], 2, 8) == [6, 7]
    assert choose([0, 1, 2, 3, 4, 6, 7], 4, 8) == [0, 1, 2, 3]


def test_no_whole_block_takes_the_lowest_free_and_too_few_free_is_none():
    assert choose([1, 2, 5, 6], 4, 8) == [1, 2, 5, 6]
    assert choose([1, 2, 5], 2, 8) == [1, 2]
    assert choose([1, 2, 5], 4, 8) is None
    with pytest.raises(ValueError):
        choose([0], 0, 8)


def test_a_reported_topology_is_filled_best_fit():
    groups = [{0, 1, 2, 3}, {4, 5, 6, 7}]
    # Two free in the first group, four in the second: a TP2 takes the first's, leaving 4-7 whole.
    assert choose([2, 3, 4, 5, 6, 7], 2, 8, groups) == [2, 3]
    assert choose([2, 3, 4, 5, 6, 7], 4, 8, groups) == [4, 5, 6, 7]
    assert choose([3, 4, 5, 6], 4, 8, groups) == [3, 4, 5, 6]  # no group holds four: any four


def test_visible_devices_round_trip_and_bad_values_are_named():
    assert visible_devices([3, 2]) == "2,3"
    assert parse_visible_devices("2,3") == [2, 3]
    assert parse_visible_devices("") is None and parse_visible_devices(None) is None
    with pytest.raises(ValueError, match="expected GPU indices such as 0,1"):
        parse_visible_devices("GPU-1a2b")
    with pytest.raises(ValueError, match="distinct"):
        parse_visible_devices("1,1")


def test_overlapping_leases_are_found_even_behind_a_long_one():
    leases = [("h", 0, 0, 10, "a"), ("h", 0, 1, 2, "b"), ("h", 0, 3, 4, "c"), ("h", 0, 10, None, "d"),
              ("h", 1, 0, 5, "e"), ("h", 1, 5, 6, "f"), ("g", 0, 0, 10, "x")]
    assert overlapping_leases(leases) == [(("h", 0), "a", "b"), (("h", 0), "a", "c")]
    assert overlapping_leases([("h", 0, 0, None, "a"), ("h", 0, 5, 6, "b")]) == [(("h", 0), "a", "b")]


def test_groups_from_links_are_the_connected_sets_smallest_first():
    links = {(0, 1), (2, 3), (3, 4), (5, 6), (6, 7), (4, 5)}
    close = lambda i, j: (i, j) in links  # noqa: E731
    assert gpus.groups_from_links(8, close) == [frozenset({0, 1}), frozenset({2, 3, 4, 5, 6, 7})]


def test_groups_from_links_tell_nothing_when_all_or_none_are_linked():
    assert gpus.groups_from_links(4, lambda i, j: True) == []
    assert gpus.groups_from_links(4, lambda i, j: False) == []


def test_a_tp2_run_goes_inside_a_group_the_topology_reported():
    groups = gpus.groups_from_links(8, lambda i, j: (i < 4) == (j < 4) and i != 0 and j != 0)
    # GPU 0 alone; 1-3 and 4-7 linked: a TP2 run takes the tighter group's GPUs.
    assert gpus.choose(range(8), 2, 8, groups) == [1, 2]
