"""The group leader's assignor for KIP-253 (seed 004, "Proposed Changes" 6)):
partitions marked for deletion and the others are assigned as two separate
lists with the same algorithm, so the undeleted partitions, the only ones that
take new records, are spread evenly over the members.

The algorithm is Kafka's RoundRobinAssignor: members sorted by member id,
partitions sorted by (topic, partition), each partition given to the next
member in the rotation that subscribes to its topic. Round robin rather than
range because range gives the first members the extra partition of every
topic, and with two lists per topic that imbalance would double.

Choice where the seed is not precise: the marked list continues the rotation
where the undeleted list stopped instead of starting at the first member
again. Each list is still spread by the same algorithm on its own (when every
member subscribes to the same topics, counts differ by at most one in each),
and the members that got one undeleted partition fewer are the first to get
a marked one, so the totals stay within one as well.

Pure: the consumer hands it the members' subscriptions (decoded from
JoinGroup) and the partitions from Metadata, and sends the assignments it
returns in SyncGroup. A topic with ``enable.ordered.delivery=false`` has no
marked partitions (such a topic cannot shrink), so it is plain round robin.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence

from refka.protocol.consumer_protocol import Assignment, Subscription

ASSIGNOR_NAME = "refka-ordered-roundrobin"


def assign(
    partitions: Mapping[str, Sequence[int]],
    marked: Mapping[str, Collection[int]],
    subscriptions: Mapping[str, Subscription],
) -> dict[str, Assignment]:
    """Assignments by member id. ``partitions``: every partition of each known
    topic (marked ones included, as Metadata lists them); ``marked``: the
    partitions of each topic marked for deletion. Topics a member subscribes
    to that are not in ``partitions`` are skipped (not created yet)."""
    members = sorted(subscriptions)
    topics_of = {m: set(subscriptions[m].topics) for m in members}
    undeleted: list[tuple[str, int]] = []
    deleting: list[tuple[str, int]] = []
    for topic in sorted(partitions):
        if not any(topic in t for t in topics_of.values()):
            continue
        gone = marked.get(topic, ())
        for p in sorted(partitions[topic]):
            (deleting if p in gone else undeleted).append((topic, p))
    assigned: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    rotation = itertools.cycle(members)
    for topic, p in itertools.chain(undeleted, deleting):
        member = next(rotation)
        while topic not in topics_of[member]:  # someone subscribes: the topic passed the filter above
            member = next(rotation)
        assigned[member].setdefault(topic, []).append(p)
    return {m: Assignment(assigned[m]) for m in members}
