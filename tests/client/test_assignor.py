"""The KIP-253 assignor (refka/client/assignor.py): marked and undeleted partitions
spread as two lists by round robin."""

from __future__ import annotations

import itertools

from refka.client.assignor import assign
from refka.protocol.consumer_protocol import Assignment, Subscription


def _members(n: int, topics: list[str]) -> dict[str, Subscription]:
    return {f"member-{i}": Subscription(topics) for i in range(n)}


def _counts(assignments: dict[str, Assignment], keep) -> list[int]:
    return [
        sum(1 for t, ps in a.assigned_partitions.items() for p in ps if keep(t, p))
        for a in assignments.values()
    ]


def test_undeleted_partitions_are_spread_evenly_whatever_is_marked() -> None:
    # "a" shrunk 2 -> 1 (partition 1 marked), "b" one partition; 2 members. Round robin over
    # all of them (a-0, a-1, b-0) gives member-0 both undeleted partitions and member-1 only
    # the marked one, which takes no new records.
    partitions = {"a": [0, 1], "b": [0]}
    plain = assign(partitions, {}, _members(2, ["a", "b"]))
    assert _counts(plain, lambda t, p: (t, p) != ("a", 1)) == [2, 0]
    ordered = assign(partitions, {"a": {1}}, _members(2, ["a", "b"]))
    assert ordered["member-0"].assigned_partitions == {"a": [0, 1]}
    assert ordered["member-1"].assigned_partitions == {"b": [0]}


def test_each_list_and_the_totals_stay_within_one_for_many_shapes() -> None:
    for members, total, first_marked in itertools.product(range(1, 6), range(1, 14), range(1, 14)):
        if first_marked > total:
            continue
        partitions = {"a": list(range(total)), "b": list(range(total + 1))}
        marked = {"a": set(range(first_marked, total))}
        result = assign(partitions, marked, _members(members, ["a", "b"]))
        gone = marked["a"]
        undeleted = _counts(result, lambda t, p, gone=gone: not (t == "a" and p in gone))
        deleting = _counts(result, lambda t, p, gone=gone: t == "a" and p in gone)
        totals = [u + d for u, d in zip(undeleted, deleting, strict=True)]
        assert max(undeleted) - min(undeleted) <= 1, (members, total, first_marked)
        assert max(deleting) - min(deleting) <= 1, (members, total, first_marked)
        assert max(totals) - min(totals) <= 1, (members, total, first_marked)
        assert sum(totals) == 2 * total + 1


def test_the_marked_list_continues_the_rotation() -> None:
    # 4 undeleted over 3 members: member-0 gets two; the one marked goes to member-1, not member-0.
    result = assign({"t": [0, 1, 2, 3, 4]}, {"t": {4}}, _members(3, ["t"]))
    assert result["member-0"].assigned_partitions == {"t": [0, 3]}
    assert result["member-1"].assigned_partitions == {"t": [1, 4]}
    assert result["member-2"].assigned_partitions == {"t": [2]}


def test_a_partition_goes_only_to_a_member_subscribed_to_its_topic() -> None:
    subscriptions = {"m-a": Subscription(["a"]), "m-b": Subscription(["b"]), "m-ab": Subscription(["a", "b"])}
    result = assign({"a": [0, 1, 2], "b": [0, 1], "c": [0]}, {"a": {2}}, subscriptions)
    every = sorted((t, p) for a in result.values() for t, ps in a.assigned_partitions.items() for p in ps)
    assert every == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]  # nobody subscribes to c
    assert set(result["m-a"].assigned_partitions) <= {"a"}
    assert set(result["m-b"].assigned_partitions) <= {"b"}


def test_assignments_survive_the_consumer_protocol() -> None:
    result = assign({"t": list(range(5))}, {"t": {3, 4}}, _members(2, ["t"]))
    for a in result.values():
        assert Assignment.decode(a.encode()) == a


def test_every_member_gets_an_assignment_even_an_empty_one() -> None:
    result = assign({"t": [0]}, {}, _members(3, ["t"]))
    assert set(result) == {"member-0", "member-1", "member-2"}
    assert result["member-2"].assigned_partitions == {}
