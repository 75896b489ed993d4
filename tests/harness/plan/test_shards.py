"""``--shard=I/N``: the pure split of files into shards (``harness/plan/shards.py``)."""

from __future__ import annotations

import pytest

from crashmatrix.harness.plan.shards import Shard, parse_shard, seconds_by_file, split, weights


def test_a_shard_spec_is_one_based_index_of_count() -> None:
    assert parse_shard("1/4") == Shard(1, 4)
    assert parse_shard(" 4 / 4 ") == Shard(4, 4)
    assert str(Shard(2, 3)) == "2/3"


@pytest.mark.parametrize("bad", ["3/2", "0/2", "x", "1/0", "-1/2", "1/2/3", "", "1.5/2"])
def test_a_bad_shard_spec_is_one_line_saying_what_to_write(bad: str) -> None:
    with pytest.raises(ValueError, match=r"^--shard=.*: .*e\.g\. --shard=1/") as error:
        parse_shard(bad)
    assert "\n" not in str(error.value)


def test_every_file_is_in_exactly_one_shard_and_the_plan_ignores_collection_order() -> None:
    weight = {f"scenarios/s{i}.yaml": float(i % 7 + 1) for i in range(41)}
    plan = split(weight, 3)
    assert len(plan) == 3
    assert sorted(f for shard in plan for f in shard) == sorted(weight)
    assert split(dict(reversed(list(weight.items()))), 3) == plan


def test_files_are_balanced_by_weight_heaviest_first() -> None:
    # One heavy scenario and many light ones: the heavy one is alone in its shard.
    weight = {"heavy.yaml": 10.0, **{f"l{i}.yaml": 1.0 for i in range(10)}}
    first, second = split(weight, 2)
    assert first == ("heavy.yaml",)
    assert len(second) == 10
    assert split({"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0}, 2) == (("a", "d"), ("b", "c"))


def test_more_shards_than_files_leaves_the_extra_shards_empty() -> None:
    assert split({"a": 1.0}, 3) == (("a",), (), ())


def test_recorded_seconds_weigh_known_files_and_estimate_new_ones_per_item() -> None:
    recorded = seconds_by_file(
        [("s/a.yaml::clean", 1.0), ("s/a.yaml::after_running[c]", 5.0), ("s/b.yaml::clean", 2.0)]
    )
    assert recorded == {"s/a.yaml": 6.0, "s/b.yaml": 2.0}
    # a: 6 s over 2 items, b: 2 s over 2 items -> 2 s per item; new c has 3 items: 6 s.
    assert weights({"s/a.yaml": 2, "s/b.yaml": 2, "s/c.yaml": 3}, recorded) == {
        "s/a.yaml": 6.0,
        "s/b.yaml": 2.0,
        "s/c.yaml": 6.0,
    }


def test_without_a_record_the_weight_is_the_item_count() -> None:
    assert weights({"a": 4, "b": 1}) == {"a": 4.0, "b": 1.0}
    assert weights({"a": 4, "b": 1}, {"other.yaml": 9.0}) == {"a": 4.0, "b": 1.0}


def test_durations_change_the_split_where_item_counts_mislead() -> None:
    items = {"slow.yaml": 2, "fast1.yaml": 3, "fast2.yaml": 3}
    by_count = split(weights(items), 2)
    by_time = split(weights(items, {"slow.yaml": 60.0, "fast1.yaml": 3.0, "fast2.yaml": 3.0}), 2)
    assert ("slow.yaml",) not in by_count
    assert by_time == (("slow.yaml",), ("fast1.yaml", "fast2.yaml"))
