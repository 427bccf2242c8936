"""A member of a classic consumer group, for the reference consumer: finding
the coordinator, JoinGroup / SyncGroup (the leader running
``refka-ordered-roundrobin``, assignor.py), heartbeats, LeaveGroup, and the
group's committed offsets (OffsetCommit / OffsetFetch).

The rules (Kafka's ConsumerCoordinator / AbstractCoordinator, eager protocol):

- The coordinator is asked of any broker (FindCoordinator, v4's
  coordinator_keys or v0-3's key); COORDINATOR_NOT_AVAILABLE and
  NOT_COORDINATOR are retried after the back-off with the broker list asked
  again. The member talks to the coordinator over a connection of its own,
  not the ClusterClient's: a JoinGroup waits for the whole group (up to the
  rebalance timeout) and a broker answers a connection's requests in order,
  so on a shared connection it would hold back the fetches from that broker.
- JoinGroup names protocol type "consumer" and one protocol,
  ``refka-ordered-roundrobin``, its metadata the member's ``Subscription``
  (consumer_protocol.py). A first join with an empty member id is answered
  MEMBER_ID_REQUIRED with the id to use (KIP-394): the member joins again at
  once with it.
- The leader (the answer's leader is this member) decodes every member's
  subscription, asks Metadata for all their topics, and assigns each topic's
  partitions, split into undeleted and marked for deletion: a partition is
  marked iff its index is at least the topic's undeleted_partition_count
  (refka's KIP-253 tag in Metadata; a topic without the tag, from a stock
  broker, has none marked). SyncGroup hands the assignments in; every member
  gets its own back.
- What a member does with each answer is the table ``ON_ANSWER`` below
  (transitions as data): REBALANCE_IN_PROGRESS joins again keeping the member
  id; ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID forget the member id and
  generation first; the coordinator errors find the coordinator again; the
  retriable others are retried after the back-off; anything else fails.
- Heartbeats go every heartbeat_interval_ms between a SyncGroup and the next
  rejoin; an answer that asks for a rejoin sets ``rejoin`` (the consumer's
  coordination task waits on it) and ends the heartbeats.
- A member joins again when the partitions of the topics it subscribes to
  change in its metadata (``metadata_changed``): the set of partitions or the
  undeleted count. Choice where Kafka differs: Kafka's leader alone watches
  (the others' metadata may lag, each change could cost a rebalance more);
  here every member does, against the metadata it had when its last join
  completed, because KIP-253's holds are computed at assignment: a member that
  sees a shrink first (a Fetch answered INVALID_PARTITION_METADATA made it
  refresh, seed 004 section 8 step 6) must not wait for the leader's next
  refresh. The leader also watches the topics of the whole group.
- OffsetCommit carries the generation and member id (or -1 and "" for a
  consumer that assigns its partitions itself) and, per partition, the
  OffsetEpoch of KIP-232 (seed 002): the leader epoch the consumer gives (the
  largest of the records it delivered, KIP-320's field) and refka's tagged
  topic_epoch (v8+), the one given with the offset or else the topic's in the
  latest metadata; an answer that says the membership changed fails the
  commit with CommitFailedError and asks for a rejoin, INVALID_INTERNAL_METADATA
  (refka's 10232: older epochs than the last commit) with
  InvalidInternalMetadataError, which is not retried. OffsetFetch uses v8+'s
  per-group form when the coordinator serves it and returns both epochs.
- ``leave`` sends LeaveGroup (the member is forgotten whatever the answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import structlog

from refka.protocol import ErrorCode
from refka.protocol.codec import DecodeError
from refka.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, Assignment, Subscription
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.heartbeat import Heartbeat
from refka.protocol.messages.join_group import JoinGroup
from refka.protocol.messages.leave_group import LeaveGroup
from refka.protocol.messages.offset_commit import OffsetCommit
from refka.protocol.messages.offset_fetch import OffsetFetch
from refka.protocol.messages.sync_group import SyncGroup

from .assignor import ASSIGNOR_NAME, assign
from .cluster import ClusterClient, KafkaConnectionError
from .connection import BrokerConnection, BrokerConnectionError
from .errors import CommitFailedError, InvalidInternalMetadataError, KafkaError, KafkaTimeoutError
from .metadata import ClusterMetadata, TopicMetadata
from .structs import OffsetAndMetadata, TopicPartition

log = structlog.get_logger("refka.client.group")
E = ErrorCode


@dataclass(frozen=True)
class MemberIdentity:
    """Who the member is in its group now; what ConsumerGroupPosition and OffsetCommit name."""

    group_id: str
    member_id: str
    generation_id: int


class Next(Enum):
    """What a member does after an answer."""

    DONE = "done"
    RETRY = "retry"  # the same request again after the back-off
    REJOIN = "rejoin"  # JoinGroup again, the member id kept
    RESET = "reset"  # forget the member id and generation, then JoinGroup again
    FIND_COORDINATOR = "find_coordinator"
    FAIL = "fail"


_COORDINATOR = {E.COORDINATOR_NOT_AVAILABLE: Next.FIND_COORDINATOR, E.NOT_COORDINATOR: Next.FIND_COORDINATOR}
_MEMBERSHIP = {E.REBALANCE_IN_PROGRESS: Next.REJOIN, E.ILLEGAL_GENERATION: Next.RESET,
               E.UNKNOWN_MEMBER_ID: Next.RESET}
# Per API, the answers whose step is not the default (retriable: RETRY, else FAIL).
ON_ANSWER: dict[str, dict[ErrorCode, Next]] = {
    "FindCoordinator": {E.NONE: Next.DONE, **_COORDINATOR},
    "JoinGroup": {E.NONE: Next.DONE, **_COORDINATOR, **_MEMBERSHIP, E.MEMBER_ID_REQUIRED: Next.REJOIN},
    "SyncGroup": {E.NONE: Next.DONE, **_COORDINATOR, **_MEMBERSHIP},
    "Heartbeat": {E.NONE: Next.DONE, **_COORDINATOR, **_MEMBERSHIP},
    "OffsetCommit": {E.NONE: Next.DONE, **_COORDINATOR, **_MEMBERSHIP},
    "OffsetFetch": {E.NONE: Next.DONE, **_COORDINATOR},
}


def next_step(api: str, code: int) -> Next:
    table = ON_ANSWER[api]
    known = ErrorCode(code) if code in ErrorCode._value2member_map_ else E.UNKNOWN_SERVER_ERROR
    step = table.get(known)
    if step is not None:
        return step
    return Next.RETRY if known.retriable else Next.FAIL


@dataclass(frozen=True)
class MemberState:
    """The member's id and generation, and whether it must join (again)."""

    member_id: str = ""
    generation_id: int = -1
    rejoin_needed: bool = True

    def on_answer(self, api: str, code: int, member_id: str = "") -> tuple[MemberState, Next]:
        """The state after an answer of ``api`` with ``code`` (``member_id``: JoinGroup's), and what to do."""
        step = next_step(api, code)
        if api == "JoinGroup" and code == E.MEMBER_ID_REQUIRED:
            return replace(self, member_id=member_id), step  # KIP-394: join again with this id
        if step is Next.RESET:
            return MemberState(), step
        if step is Next.REJOIN:
            return replace(self, rejoin_needed=True), step
        return self, step

    def joined(self, member_id: str, generation_id: int) -> MemberState:
        return MemberState(member_id, generation_id, rejoin_needed=True)  # until its SyncGroup is answered

    def synced(self) -> MemberState:
        return replace(self, rejoin_needed=False)


# -- the partitions a member watches ------------------------------------------------------

Snapshot = dict[str, tuple[frozenset[int], int]]


def marked_partitions(tm: TopicMetadata) -> frozenset[int]:
    """The partitions of a topic marked for deletion (KIP-253): index >= undeleted count."""
    if tm.counts is None:
        return frozenset()
    return frozenset(p for p in tm.partitions if p >= tm.counts.undeleted)


def partition_snapshot(metadata: ClusterMetadata, topics: Iterable[str]) -> Snapshot:
    """What a change of which makes a member rejoin: each known topic's partitions and
    undeleted count (a topic without metadata is left out, so its creation is a change)."""
    out: Snapshot = {}
    for t in topics:
        tm = metadata.topics.get(t)
        if tm is not None:
            out[t] = (frozenset(tm.partitions), tm.writable_count)
    return out


def leader_assignments(metadata: ClusterMetadata, subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
    """The leader's assignment of every subscribed topic's partitions (assignor.py)."""
    topics = {t for s in subscriptions.values() for t in s.topics}
    partitions = {t: sorted(metadata.topics[t].partitions) for t in topics if t in metadata.topics}
    marked = {t: marked_partitions(metadata.topics[t]) for t in partitions}
    return assign(partitions, marked, subscriptions)


# -- the member -----------------------------------------------------------------------------


class GroupMember:
    def __init__(self, cluster: ClusterClient, group_id: str, *, session_timeout_ms: int = 45000,
                 rebalance_timeout_ms: int = 300000, heartbeat_interval_ms: int = 3000,
                 retry_backoff_ms: int = 100, request_timeout_ms: int = 40000) -> None:
        self._cluster = cluster
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.state = MemberState()
        self.rejoin = asyncio.Event()  # set when the member must join again
        self.is_leader = False
        self.group_topics: frozenset[str] = frozenset()  # every member's topics, as the leader saw them
        self.rebalances = 0  # completed joins (tests read it)
        self._topics: frozenset[str] = frozenset()
        self._joined_snapshot: Snapshot | None = None
        self._assigned_snapshot: Snapshot | None = None
        self._coordinator: BrokerConnection | None = None
        self._finding = asyncio.Lock()
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def identity(self) -> MemberIdentity:
        return MemberIdentity(self.group_id, self.state.member_id, self.state.generation_id)

    # -- the coordinator ----------------------------------------------------------------

    async def _connection(self) -> BrokerConnection:
        async with self._finding:
            while self._coordinator is None or self._coordinator.closed:
                self._coordinator = await self._find_coordinator()
            return self._coordinator

    async def _find_coordinator(self) -> BrokerConnection | None:
        """The coordinator's connection, or None after a failed round (and the back-off)."""
        for node_id in list(self._cluster.metadata.brokers):
            try:
                conn = await self._cluster.connection(node_id)
                v = conn.version_for(FindCoordinator)
                req = (FindCoordinator.Request(coordinator_keys=[self.group_id]) if v >= 4
                       else FindCoordinator.Request(key=self.group_id))
                resp = await conn.request(FindCoordinator, req, v)
            except (BrokerConnectionError, ValueError):
                continue
            found = resp.coordinators[0] if v >= 4 else resp
            if found.error_code == E.NONE:
                try:
                    coordinator = await self._open_coordinator(found.node_id, found.host, found.port)
                except BrokerConnectionError:
                    break
                log.debug("coordinator_found", group=self.group_id, node_id=found.node_id)
                return coordinator
            if next_step("FindCoordinator", found.error_code) is Next.FAIL:
                raise KafkaError(found.error_code, f"FindCoordinator for group {self.group_id}")
            break
        await asyncio.sleep(self.retry_backoff)
        try:
            await self._cluster.refresh(())
        except KafkaConnectionError:
            pass
        return None

    async def _open_coordinator(self, node_id: int, host: str, port: int) -> BrokerConnection:
        conn = BrokerConnection(host, port, self._cluster.client_id, request_timeout=self.request_timeout)
        return await conn.connect()

    def _coordinator_lost(self) -> None:
        conn, self._coordinator = self._coordinator, None
        if conn is not None and not conn.closed:
            asyncio.ensure_future(conn.close())

    async def _request(self, api: Any, body: Any, timeout: float | None = None) -> Any:
        """Sends ``body`` (or ``body(version)`` when the request's shape depends on the
        version) to the coordinator. Raises BrokerConnectionError (the coordinator
        forgotten) when the connection fails."""
        conn = await self._connection()
        v = conn.version_for(api)
        try:
            return await conn.request(api, body(v) if callable(body) else body, v, timeout=timeout)
        except BrokerConnectionError:
            self._coordinator_lost()
            raise

    # -- joining --------------------------------------------------------------------------

    async def join(self, topics: Collection[str]) -> dict[str, list[int]]:
        """Joins (or rejoins) the group subscribed to ``topics``; the partitions assigned to
        this member, by topic. Heartbeats run from here until the next join or ``leave``."""
        self._stop_heartbeat()
        self.rejoin.clear()
        self._topics = frozenset(topics)
        self._joined_snapshot = self._assigned_snapshot = None
        metadata = Subscription(sorted(topics)).encode()
        while True:
            try:
                joined = await self._join_once(metadata)
            except BrokerConnectionError:
                await asyncio.sleep(self.retry_backoff)
                continue
            if joined is not None:
                return joined

    async def _join_once(self, subscription: bytes) -> dict[str, list[int]] | None:
        J = JoinGroup.Request
        resp = await self._request(JoinGroup, J(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.state.member_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=[J.JoinGroupRequestProtocol(name=ASSIGNOR_NAME, metadata=subscription)]),
            timeout=self.rebalance_timeout_ms / 1000 + self.request_timeout)
        self.state, step = self.state.on_answer("JoinGroup", resp.error_code, resp.member_id)
        if step is not Next.DONE:
            await self._after(step, "JoinGroup", resp.error_code)
            return None
        self.state = self.state.joined(resp.member_id, resp.generation_id)
        self.is_leader = resp.leader == resp.member_id
        assignments = await self._assign(resp.members) if self.is_leader else []
        S = SyncGroup.Request
        generation = self.state.generation_id
        sync = await self._request(SyncGroup, S(
            group_id=self.group_id, generation_id=generation, member_id=self.state.member_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=resp.protocol_name or ASSIGNOR_NAME,
            assignments=assignments), timeout=self.rebalance_timeout_ms / 1000 + self.request_timeout)
        self.state, step = self.state.on_answer("SyncGroup", sync.error_code)
        if step is not Next.DONE:
            await self._after(step, "SyncGroup", sync.error_code)
            return None
        self.state = self.state.synced()
        assigned = Assignment.decode(sync.assignment).assigned_partitions if sync.assignment else {}
        self.rebalances += 1
        log.info("group_joined", group=self.group_id, member_id=self.state.member_id,
                 generation_id=generation, leader=self.is_leader,
                 assigned={t: sorted(ps) for t, ps in assigned.items()})
        self._heartbeat = asyncio.create_task(self._heartbeats(), name=f"{self.group_id}-heartbeat")
        return {t: sorted(ps) for t, ps in assigned.items()}

    async def _after(self, step: Next, api: str, code: int) -> None:
        if step is Next.FAIL:
            raise KafkaError(code, f"{api} of group {self.group_id}")
        if step is Next.FIND_COORDINATOR:
            self._coordinator_lost()
        if step is not Next.REJOIN or code != E.MEMBER_ID_REQUIRED:
            await asyncio.sleep(self.retry_backoff)

    async def _assign(self, members: Sequence[Any]) -> list[Any]:
        subscriptions: dict[str, Subscription] = {}
        for m in members:
            try:
                subscriptions[m.member_id] = Subscription.decode(m.metadata)
            except DecodeError as e:  # a member's bytes, not ours to refuse: it gets nothing
                log.warning("subscription_undecodable", group=self.group_id, member_id=m.member_id, error=str(e))
                subscriptions[m.member_id] = Subscription(())
        self.group_topics = frozenset(t for s in subscriptions.values() for t in s.topics)
        await self._refresh(self.group_topics)
        md = self._cluster.metadata
        self._assigned_snapshot = partition_snapshot(md, self.group_topics)
        A = SyncGroup.Request.SyncGroupRequestAssignment
        return [A(member_id=m, assignment=a.encode()) for m, a in leader_assignments(md, subscriptions).items()]

    async def _refresh(self, topics: Iterable[str]) -> None:
        while True:
            try:
                await self._cluster.refresh(topics)
                return
            except KafkaConnectionError:
                await asyncio.sleep(self.retry_backoff)

    def joined_metadata(self) -> None:
        """Takes the snapshot later metadata is compared with; the consumer calls it once it has
        refreshed the metadata of the partitions its join gave it."""
        self._joined_snapshot = partition_snapshot(self._cluster.metadata, self._topics)

    def metadata_changed(self) -> bool:
        """True (and a rejoin asked for) when the subscribed topics' partitions changed since
        the last join (the leader: also the group's topics since it assigned them)."""
        md = self._cluster.metadata
        changed = (self._joined_snapshot is not None
                   and partition_snapshot(md, self._topics) != self._joined_snapshot)
        if self.is_leader and self._assigned_snapshot is not None:
            changed = changed or partition_snapshot(md, self.group_topics) != self._assigned_snapshot
        if changed and not self.rejoin.is_set():
            log.info("partitions_changed", group=self.group_id, member_id=self.state.member_id)
            self.request_rejoin()
        return changed

    def request_rejoin(self) -> None:
        self.state = replace(self.state, rejoin_needed=True)
        self.rejoin.set()

    # -- heartbeats -----------------------------------------------------------------------

    async def _heartbeats(self) -> None:
        H = Heartbeat.Request
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            identity = self.identity
            try:
                resp = await self._request(Heartbeat, H(
                    group_id=identity.group_id, generation_id=identity.generation_id,
                    member_id=identity.member_id), timeout=self.request_timeout)
            except BrokerConnectionError:
                continue  # the coordinator is found again for the next one
            except KafkaError as e:  # FindCoordinator refused for good
                log.error("heartbeat_failed", group=self.group_id, error=str(e))
                self.request_rejoin()
                return
            self.state, step = self.state.on_answer("Heartbeat", resp.error_code)
            if step in (Next.REJOIN, Next.RESET, Next.FAIL):
                log.info("heartbeat_rejoin", group=self.group_id, error=ErrorCode(resp.error_code).name)
                self.rejoin.set()
                return
            if step is Next.FIND_COORDINATOR:
                self._coordinator_lost()

    def _stop_heartbeat(self) -> None:
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()

    # -- offsets --------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], *, in_group: bool) -> None:
        """Commits ``offsets``; as a member of the current generation when ``in_group``, else as a
        consumer that assigns itself (generation -1, no member id)."""
        if not offsets:
            return
        identity = self.identity if in_group else MemberIdentity(self.group_id, "", -1)
        C = OffsetCommit.Request
        Topic = C.OffsetCommitRequestTopic
        Part = Topic.OffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        topics = self._cluster.metadata.topics
        for tp, om in offsets.items():
            tm = topics.get(tp.topic)
            topic_epoch = om.topic_epoch if om.topic_epoch >= 0 or tm is None else tm.topic_epoch
            by_topic.setdefault(tp.topic, []).append(Part(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata, topic_epoch=topic_epoch))
        req = C(group_id=self.group_id, generation_id_or_member_epoch=identity.generation_id,
                member_id=identity.member_id, topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp, step, code = await self._retried("OffsetCommit", req, lambda r: [
            p.error_code for t in r.topics for p in t.partitions])
        if code == E.INVALID_INTERNAL_METADATA:
            raise InvalidInternalMetadataError(sorted(
                TopicPartition(t.name, p.partition_index) for t in resp.topics for p in t.partitions
                if p.error_code == E.INVALID_INTERNAL_METADATA))
        if step in (Next.REJOIN, Next.RESET):
            self.state, _ = self.state.on_answer("OffsetCommit", code)
            self.rejoin.set()
            raise CommitFailedError(f"group {self.group_id} rebalanced: {ErrorCode(code).name}")
        if step is not Next.DONE:
            raise KafkaError(code, f"OffsetCommit of group {self.group_id}")

    async def fetch_committed(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets of ``partitions`` (those without one are left out)."""
        if not partitions:
            return {}
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        F = OffsetFetch.Request

        def body(v: int) -> Any:
            if v >= 8:
                G = F.OffsetFetchRequestGroup
                return F(groups=[G(group_id=self.group_id, topics=[
                    G.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()])],
                    require_stable=True, refka_extensions=True)
            return F(group_id=self.group_id, require_stable=True, refka_extensions=True, topics=[
                F.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])

        resp, step, code = await self._retried("OffsetFetch", body, lambda r: [
            g.error_code for g in _groups(r)] + [p.error_code for g in _groups(r) for t in g.topics for p in t.partitions])
        if step is not Next.DONE:
            raise KafkaError(code, f"OffsetFetch of group {self.group_id}")
        return {TopicPartition(t.name, p.partition_index):
                OffsetAndMetadata(p.committed_offset, p.metadata or "", p.committed_leader_epoch, p.topic_epoch)
                for g in _groups(resp) for t in g.topics for p in t.partitions if p.committed_offset >= 0}

    async def _retried(self, api_name: str, body: Any, codes_of: Callable[[Any], list[int]]) -> tuple[Any, Next, int]:
        """Sends an offsets request until its answer's most severe step is neither a retry nor
        a coordinator move; that answer, step and code. KafkaTimeoutError after request_timeout_ms
        (finding the coordinator included)."""
        api = _OFFSET_APIS[api_name]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.request_timeout
        while True:
            resp = None
            try:
                async with asyncio.timeout_at(deadline):
                    resp = await self._request(api, body, timeout=self.request_timeout)
                codes = codes_of(resp)
            except BrokerConnectionError:
                codes = [E.NETWORK_EXCEPTION]
            except TimeoutError:
                raise KafkaTimeoutError(f"{api_name} of group {self.group_id}: no answer in time") from None
            steps = [next_step(api_name, c) for c in codes]
            worst = max(steps, key=_SEVERITY.__getitem__, default=Next.DONE)
            code = next((c for c, st in zip(codes, steps, strict=True) if st is worst), E.NONE)
            if worst not in (Next.RETRY, Next.FIND_COORDINATOR):
                return resp, worst, code
            if worst is Next.FIND_COORDINATOR:
                self._coordinator_lost()
            if loop.time() + self.retry_backoff > deadline:
                raise KafkaTimeoutError(f"{api_name} of group {self.group_id}: {ErrorCode(code).name}")
            await asyncio.sleep(self.retry_backoff)

    # -- leaving --------------------------------------------------------------------------

    async def leave(self) -> None:
        """LeaveGroup (when the member has an id), so the group rebalances at once."""
        self._stop_heartbeat()
        member_id, self.state = self.state.member_id, MemberState()
        if not member_id:
            return
        L = LeaveGroup.Request
        try:
            async with asyncio.timeout(self.request_timeout):
                await self._request(LeaveGroup, L(
                    group_id=self.group_id, member_id=member_id,
                    members=[L.MemberIdentity(member_id=member_id, reason="the consumer is stopping")]))
        except (BrokerConnectionError, KafkaError, ValueError, TimeoutError) as e:
            log.info("leave_group_failed", group=self.group_id, member_id=member_id, error=str(e))

    async def close(self) -> None:
        self._stop_heartbeat()
        conn, self._coordinator = self._coordinator, None
        if conn is not None:
            await conn.close()


def _groups(resp: Any) -> list[Any]:
    """OffsetFetch's answer per group: v8+'s groups, or the v1-v7 answer itself (one group)."""
    return list(resp.groups) if resp.groups else [resp]


_OFFSET_APIS = {"OffsetCommit": OffsetCommit, "OffsetFetch": OffsetFetch}
# The step an answer with several partition codes takes: the most severe of theirs.
_SEVERITY = {Next.DONE: 0, Next.RETRY: 1, Next.FIND_COORDINATOR: 2, Next.REJOIN: 3, Next.RESET: 4, Next.FAIL: 5}
