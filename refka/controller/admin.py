"""The znode writes a broker makes for admin requests, like Kafka's AdminZkClient.

A broker handling CreateTopics / DeleteTopics / CreatePartitions /
AlterConfigs calls these; the controller sees the znodes change and does the
rest (leaders, epochs, LeaderAndIsr, UpdateMetadata). Each function validates
as Kafka does and raises an ``AdminError`` whose ``error_code`` is the
answer for the client; a bad topic config is the topic-config table's
``InvalidConfigError`` (refka.common.topic_config), which carries its
``error_code`` (INVALID_CONFIG) the same way.

Also here, for the broker's own lifecycle: ``ensure_cluster`` (persistent
paths and the cluster id), ``register_broker`` / ``BrokerRegistration`` (the
ephemeral ``/brokers/ids/<id>``, kept across session expiry), and the
ISR-change path of the replica manager.

ISR changes (the choice, and how to use it). Like Kafka before KIP-497, the
partition *leader* writes a shrunk or expanded ISR itself:
``update_isr(store, topic, partition, new_state, zk_version)`` sets the state
znode conditionally on the zk_version it got from LeaderAndIsr (or from its
own previous update); a BadVersionError means the controller changed the
partition meanwhile, and the leader waits for its LeaderAndIsr. Then it calls
``notify_isr_change(store, [(topic, partition), ...])`` (batching is fine),
which writes a sequential ``/isr_change_notification/isr_change_`` znode; the
controller reads the changed states, broadcasts UpdateMetadata and deletes the
notification. This works the same in one process and across processes.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from refka.common import TopicPartition
from refka.common.topic_config import InvalidConfigError, ordered_delivery, validate_topic_configs
from refka.protocol.errors import ErrorCode

from . import znodes
from .store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError, SessionState, StoreError

log = structlog.get_logger("refka.controller.admin")

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


# ---- errors ----------------------------------------------------------------------------------


class AdminError(Exception):
    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class TopicExistsError(AdminError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidTopicError(AdminError):
    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidPartitionsError(AdminError):
    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(AdminError):
    error_code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(AdminError):
    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class PolicyViolationError(AdminError):
    """The request would pass a limit the cluster sets (KIP-578's partition limits)."""

    error_code = ErrorCode.POLICY_VIOLATION


# What create_topic and create_partitions call with the new partitions' assignment
# (partition -> replicas) before anything is written; it raises to refuse them.
PartitionCheck = Callable[[Mapping[int, Sequence[int]]], None]


class UnknownTopicError(AdminError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class BrokerIdInUseError(AdminError):
    """Another live session holds ``/brokers/ids/<id>``."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


# ---- topic names ---------------------------------------------------------------------------------


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: [a-zA-Z0-9._-], 1 to 249 characters, not '.' or '..'."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


# ---- replica assignment ------------------------------------------------------------------------


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(str(brokers[b]), []).append(b)
    racks = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        rack = by_rack[racks[i]]
        if rack:
            out.append(rack.pop(0))
        i = (i + 1) % len(racks)
    return out


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokers: round-robin, rack-aware when every
    broker has a rack (racks alternate so a partition's replicas land on distinct
    racks while it can), shifted so followers spread. ``brokers``: id -> rack.
    Brokers without racks mixed with brokers with racks: racks are ignored (Kafka's
    RackAwareMode.Safe)."""
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    rng = rng or random.Random()
    rack_aware = all(r is not None for r in brokers.values()) and len(set(brokers.values())) > 1
    arranged = _rack_alternated(brokers) if rack_aware else sorted(brokers)
    n = len(arranged)
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    pid = max(0, start_partition_id)
    num_racks = len(set(brokers.values()))
    out: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [arranged[first]]
        if not rack_aware:
            replicas += [arranged[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        else:
            racks_used = {brokers[arranged[first]]}
            k = 0
            for _ in range(replication_factor - 1):
                while True:
                    b = arranged[_replica_index(first, shift * num_racks, k, n)]
                    k += 1
                    rack_ok = brokers[b] not in racks_used or len(racks_used) == num_racks
                    broker_ok = b not in replicas or len(replicas) == n
                    if rack_ok and broker_ok:
                        replicas.append(b)
                        racks_used.add(brokers[b])
                        break
        out[pid] = replicas
        pid += 1
    return out


def validate_assignment(
    assignment: Mapping[int, Sequence[int]],
    brokers: Mapping[int, str | None] | Sequence[int],
    *,
    first_partition: int = 0,
    replication_factor: int | None = None,
) -> dict[int, list[int]]:
    """Partitions numbered from ``first_partition`` without gaps, each with the same
    number of distinct replicas, all on known brokers."""
    if not assignment:
        raise InvalidReplicaAssignmentError("Replica assignment is empty")
    ids = sorted(assignment)
    if ids != list(range(first_partition, first_partition + len(ids))):
        raise InvalidReplicaAssignmentError(
            f"Partitions should be consecutive from {first_partition}, got {ids}"
        )
    known = set(brokers)
    out: dict[int, list[int]] = {}
    for p in ids:
        replicas = [int(r) for r in assignment[p]]
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Partition {p} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: {replicas}")
        if replication_factor is None:
            replication_factor = len(replicas)
        if len(replicas) != replication_factor:
            raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
        unknown = set(replicas) - known
        if unknown:
            raise InvalidReplicaAssignmentError(f"Unknown broker(s) in replica assignment: {sorted(unknown)}")
        out[p] = replicas
    return out


# ---- cluster and brokers -----------------------------------------------------------------------


async def ensure_cluster(store: MetadataStore) -> str:
    """Creates the persistent paths everyone watches and ``/cluster/id``; returns the id."""
    for path in znodes.PERSISTENT_PATHS:
        await store.ensure_path(path)
    try:
        data, _ = await store.get(znodes.CLUSTER_ID)
        return znodes.ClusterId.from_json(data).id
    except NoNodeError:
        pass
    cid = znodes.ClusterId.generate()
    try:
        await store.create(znodes.CLUSTER_ID, cid.to_json())
        return cid.id
    except NodeExistsError:
        data, _ = await store.get(znodes.CLUSTER_ID)
        return znodes.ClusterId.from_json(data).id


async def register_broker(store: MetadataStore, info: znodes.BrokerInfo) -> int:
    """Creates the ephemeral ``/brokers/ids/<id>`` on ``store``'s session (a
    MetadataStore is one session) and returns the broker epoch (its czxid).

    Safe to retry: a node already owned by this session is ours. Call again
    after the session is LOST and CONNECTED again (the node went with it).
    """
    await store.ensure_path(znodes.BROKER_IDS)
    try:
        await store.create(info.path, info.to_json(), ephemeral=True)
    except NodeExistsError:
        stat = await store.exists(info.path)
        if stat is None:
            return await register_broker(store, info)
        if stat.ephemeral_owner != store.session_id:
            raise BrokerIdInUseError(
                f"broker id {info.broker_id} is registered by another session ({stat.ephemeral_owner:#x})"
            ) from None
        return stat.czxid
    stat = await store.exists(info.path)
    return stat.czxid if stat is not None else -1


class BrokerRegistration:
    """Keeps ``/brokers/ids/<id>`` registered on ``store``'s session.

    ``start()`` registers and returns the broker epoch; after the session is
    LOST and a new one CONNECTED, it registers again (a new broker epoch,
    reported to ``on_registered``); ``stop()`` deregisters, so the controller
    sees the broker leave at once rather than at session expiry.
    """

    def __init__(
        self,
        store: MetadataStore,
        info: znodes.BrokerInfo,
        on_registered: Callable[[int], object] | None = None,
    ) -> None:
        self.store = store
        self.info = info
        self.epoch = -1
        self._on_registered = on_registered
        self._lost = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        self.store.add_listener(self._on_state)
        self.epoch = await register_broker(self.store, self.info)
        return self.epoch

    async def stop(self) -> None:
        self.store.remove_listener(self._on_state)
        if self._task is not None:
            self._task.cancel()
        try:
            await deregister_broker(self.store, self.info.broker_id)
        except StoreError:
            pass  # the session is gone, and the node with it

    def _on_state(self, state: SessionState) -> None:
        if state == SessionState.LOST:
            self._lost = True
        elif state == SessionState.CONNECTED and self._lost:
            self._lost = False
            self._task = asyncio.get_running_loop().create_task(self._register_again())

    async def _register_again(self) -> None:
        for _ in range(50):
            try:
                self.epoch = await register_broker(self.store, self.info)
            except StoreError as e:
                log.info("broker_reregister_retry", broker=self.info.broker_id, reason=repr(e))
                await asyncio.sleep(0.2)
                continue
            log.info("broker_reregistered", broker=self.info.broker_id, broker_epoch=self.epoch)
            if self._on_registered is not None:
                self._on_registered(self.epoch)
            return
        log.error("broker_reregister_failed", broker=self.info.broker_id)


async def deregister_broker(store: MetadataStore, broker_id: int) -> None:
    """Removes our ``/brokers/ids/<id>`` (before a clean stop, so the controller reacts at once)."""
    path = znodes.broker_path(broker_id)
    stat = await store.exists(path)
    if stat is not None and stat.ephemeral_owner == store.session_id:
        try:
            await store.delete(path, version=stat.version)
        except NoNodeError:
            pass


async def live_brokers(store: MetadataStore) -> dict[int, znodes.BrokerInfo]:
    out = {}
    for child in await store.get_children(znodes.BROKER_IDS):
        try:
            data, _ = await store.get(znodes.broker_path(int(child)))
        except NoNodeError:
            continue
        out[int(child)] = znodes.BrokerInfo.from_json(int(child), data)
    return out


# ---- topics ------------------------------------------------------------------------------------


async def list_topics(store: MetadataStore) -> list[str]:
    try:
        return await store.get_children(znodes.BROKER_TOPICS)
    except NoNodeError:
        return []


async def read_topic(store: MetadataStore, name: str) -> znodes.TopicAssignment | None:
    try:
        data, _ = await store.get(znodes.topic_path(name))
    except NoNodeError:
        return None
    return znodes.TopicAssignment.from_json(name, data)


@dataclass(frozen=True)
class TopicSpec:
    """One topic of a CreateTopics request: counts, or a manual ``replica_assignment``
    (partition -> replicas) from which the counts are taken."""

    name: str
    num_partitions: int
    replication_factor: int
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, Any] | None = None


# Bytes of znode data per ZooKeeper multi in create_topics: well inside jute.maxbuffer (1 MiB).
_MULTI_BYTES = 256 * 1024
# A topic to write: its index in the request, the topic, its znode's JSON, its config's JSON,
# and whether a config znode is there already (left by an older topic of that name).
_Write = tuple[int, znodes.TopicAssignment, bytes, bytes, bool]


async def create_topic(
    store: MetadataStore,
    name: str,
    num_partitions: int,
    replication_factor: int,
    replica_assignment: Mapping[int, Sequence[int]] | None,
    configs: Mapping[str, Any] | None,
    brokers: Mapping[int, str | None],
    *,
    validate_only: bool = False,
    rng: random.Random | None = None,
    check: PartitionCheck | None = None,
) -> znodes.TopicAssignment:
    """One topic through ``create_topics``; raises its error."""
    spec = TopicSpec(name, num_partitions, replication_factor, replica_assignment, configs)
    (result,) = await create_topics(store, [spec], brokers, validate_only=validate_only, rng=rng, check=check)
    if isinstance(result, Exception):
        raise result
    return result


async def create_topics(
    store: MetadataStore,
    specs: Sequence[TopicSpec],
    brokers: Mapping[int, str | None],
    *,
    validate_only: bool = False,
    rng: random.Random | None = None,
    check: PartitionCheck | None = None,
) -> list[znodes.TopicAssignment | AdminError | InvalidConfigError]:
    """Writes ``/config/topics/<t>`` and ``/brokers/topics/<t>`` for each spec.

    Returns, in the specs' order, the new topic or the error that refused it
    (``error_code`` is the answer for the client). ``brokers``: the live
    brokers, id -> rack (None without one); without a ``replica_assignment``
    replicas are assigned rack-aware round-robin. A new topic has a fresh
    topic id and initial = undeleted partition count (KIP-253); the controller
    adds its topic_epoch and partition epochs.

    ``check`` sees each topic's new partitions in the specs' order, after
    everything else about the topic passed, and raises to refuse it; it keeps
    its own tally, so a topic is counted with those admitted before it.

    Batched for the ZooKeeper store, where each round trip and each
    transaction (one log fsync) is most of a topic's cost: the existence
    reads go out together, topics are committed many to a multi, and only a
    multi that fails (a topic created meanwhile) is retried topic by topic to
    say which one.
    """
    results: list[znodes.TopicAssignment | AdminError | InvalidConfigError | None] = [None] * len(specs)
    checked: list[tuple[int, TopicSpec, dict[int, list[int]], dict[str, str]]] = []
    for i, spec in enumerate(specs):
        try:
            validate_topic_name(spec.name)
            if spec.replica_assignment:
                assignment = validate_assignment(spec.replica_assignment, brokers)
            else:
                assignment = assign_replicas(brokers, spec.num_partitions, spec.replication_factor, rng=rng)
            config = validate_topic_configs(spec.configs or {})
        except (AdminError, InvalidConfigError) as e:
            results[i] = e
            continue
        checked.append((i, spec, assignment, config))

    paths = [p for _, spec, _, _ in checked
             for p in (znodes.delete_topic_path(spec.name), znodes.topic_path(spec.name),
                       znodes.topic_config_path(spec.name))]
    stats = await asyncio.gather(*(store.exists(p) for p in paths))
    # Only a name with '.' or '_' can collide (Kafka's Topic.hasCollisionChars): the others skip
    # listing every topic, which at 10^5 topics is most of a creation's cost (KIP-526 bench).
    taken: dict[str, list[str]] = {}
    if any("." in spec.name or "_" in spec.name for _, spec, _, _ in checked):
        for t in await list_topics(store):
            taken.setdefault(_collision_key(t), []).append(t)

    writes: list[_Write] = []
    admitted: set[str] = set()
    for k, (i, spec, assignment, config) in enumerate(checked):
        name = spec.name
        marked, exists, has_config = stats[3 * k: 3 * k + 3]
        try:
            if marked is not None:
                raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
            if exists is not None or name in admitted:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            if "." in name or "_" in name:
                clashes = [t for t in taken.get(_collision_key(name), ()) if t != name]
                if clashes:
                    raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(clashes)}")
            if check is not None:
                check(assignment)
        except AdminError as e:
            results[i] = e
            continue
        admitted.add(name)
        taken.setdefault(_collision_key(name), []).append(name)  # a later spec collides with this one
        n = len(assignment)
        topic = znodes.TopicAssignment(
            topic=name,
            topic_id=znodes.new_topic_id(),
            partitions=assignment,
            initial_partition_count=n,
            undeleted_partition_count=n,
        )
        results[i] = topic
        writes.append((i, topic, topic.to_json(), znodes.TopicConfig(config).to_json(), has_config is not None))
    if not validate_only and writes:
        await _write_topics(store, writes, results)
    return [r for r in results if r is not None]


async def _write_topics(
    store: MetadataStore,
    writes: Sequence[_Write],
    results: list[znodes.TopicAssignment | AdminError | InvalidConfigError | None],
) -> None:
    await store.ensure_path(znodes.BROKER_TOPICS)
    await store.ensure_path(znodes.CONFIG_TOPICS)
    batch: list[_Write] = []
    size = 0
    for w in writes:
        batch.append(w)
        size += len(w[2]) + len(w[3])
        if size >= _MULTI_BYTES:
            await _commit_topics(store, batch, results)
            batch, size = [], 0
    await _commit_topics(store, batch, results)


async def _commit_topics(
    store: MetadataStore,
    batch: Sequence[_Write],
    results: list[znodes.TopicAssignment | AdminError | InvalidConfigError | None],
) -> None:
    """Commits the topics of ``batch`` in one transaction; if it fails, one by one."""
    if not batch:
        return

    def add(txn: Any, w: _Write) -> None:
        _, topic, topic_json, config_json, has_config = w
        if has_config:
            txn.set_data(znodes.topic_config_path(topic.topic), config_json)  # left by an older topic
        else:
            txn.create(znodes.topic_config_path(topic.topic), config_json)
        txn.create(topic.path, topic_json)

    txn = store.transaction()
    for w in batch:
        add(txn, w)
    try:
        await txn.commit()
        return
    except NodeExistsError:
        if len(batch) == 1:
            i, topic = batch[0][0], batch[0][1]
            results[i] = TopicExistsError(f"Topic '{topic.topic}' already exists.")
            return
    except NoNodeError:  # an older topic's config deleted meanwhile: one by one says whose
        if len(batch) == 1:
            raise
    for w in batch:  # which topic was created meanwhile
        txn = store.transaction()
        add(txn, w)
        try:
            await txn.commit()
        except NodeExistsError:
            results[w[0]] = TopicExistsError(f"Topic '{w[1].topic}' already exists.")


async def delete_topic(store: MetadataStore, name: str) -> None:
    """Marks the topic for deletion (``/admin/delete_topics/<t>``); the controller deletes it."""
    if await store.exists(znodes.topic_path(name)) is None:
        raise UnknownTopicError(f"Topic '{name}' does not exist.")
    await store.ensure_path(znodes.DELETE_TOPICS)
    try:
        await store.create(znodes.delete_topic_path(name), b"")
    except NodeExistsError:
        pass  # already marked


async def create_partitions(
    store: MetadataStore,
    name: str,
    new_total: int,
    assignment: Sequence[Sequence[int]] | None,
    brokers: Mapping[int, str | None],
    *,
    validate_only: bool = False,
    rng: random.Random | None = None,
    check: PartitionCheck | None = None,
) -> znodes.TopicAssignment:
    """CreatePartitions: grows the topic, or shrinks it (KIP-253 partition deletion).

    The topic's partition count here is the number of its partitions that are not
    marked (nor about to be marked) for deletion: its ``undeleted_partition_count``, the
    count producers use, once the controller has applied the last change. Growing writes the
    longer assignment to ``/brokers/topics/<t>`` (``assignment`` lists the *new*
    partitions' replicas); the controller runs KIP-253's expansion. Shrinking to
    ``initial_partition_count <= new_total`` writes ``undeleted_partition_count =
    new_total`` and nothing else (seed step 3); the controller marks partitions
    new_total.. for deletion. Refused with INVALID_PARTITIONS, saying why:

    - the same count (Kafka's answer, "Topic already has N partitions.");
    - a count below ``initial_partition_count``;
    - growing while partitions are marked for deletion, or still being removed
      (seed, Goals: not until they are drained and gone);
    - a change while the controller has not finished the previous one (partitions
      not marked yet, or being removed; a growth may add to a growth);
    - with ``enable.ordered.delivery=false``, shrinking (Kafka's rules: grow only).
    """
    for _ in range(5):
        try:
            data, stat = await store.get(znodes.topic_path(name))
        except NoNodeError:
            raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
        topic = znodes.TopicAssignment.from_json(name, data)
        if await store.exists(znodes.delete_topic_path(name)) is not None:
            raise InvalidTopicError(f"Topic '{name}' is marked for deletion.")
        pending = await _pending(store, topic)
        current = len(topic.partitions) - len(pending.marked) - len(pending.marking)
        if new_total == current:
            raise InvalidPartitionsError(f"Topic already has {current} partitions.")
        # A growth may add to one the controller has not finished (it creates them all at
        # once); anything else waits until the last change is done.
        unfinished = pending.unfinished(new_total > current)
        if unfinished:
            raise InvalidPartitionsError(
                f"The controller has not finished the last change of topic '{name}''s partition "
                f"count (KIP-253): {unfinished}; try again."
            )
        if new_total < current:
            _check_shrink(topic, current, new_total, await _ordered_delivery(store, name), assignment)
            topic.undeleted_partition_count = new_total
        else:
            if pending.marked:
                raise InvalidPartitionsError(
                    f"Partitions {pending.marked} of topic '{name}' are marked for deletion (KIP-253): it "
                    "can grow again once they are drained and removed."
                )
            topic.partitions.update(_new_assignment(topic, new_total, assignment, brokers, rng, check))
        if validate_only:
            return topic
        try:
            await store.set(topic.path, topic.to_json(), version=stat.version)
        except BadVersionError:
            continue  # the topic changed under us: read it again
        return topic
    raise AdminError("the topic kept changing while changing its partitions")


async def _ordered_delivery(store: MetadataStore, name: str) -> bool:
    try:
        data, _ = await store.get(znodes.topic_config_path(name))
    except NoNodeError:
        return ordered_delivery({})
    return ordered_delivery(znodes.TopicConfig.from_json(data).config)


@dataclass
class _Pending:
    """A topic's partitions at or above its undeleted_partition_count, and those whose
    removal the controller has begun (a partition znode left outside the assignment)."""

    marked: list[int] = field(default_factory=list)  # marked for deletion: a finished shrink
    marking: list[int] = field(default_factory=list)  # a shrink the controller has not marked yet
    creating: list[int] = field(default_factory=list)  # a growth: no partition znode yet
    removing: list[int] = field(default_factory=list)  # drained, being removed

    def unfinished(self, growing: bool) -> str:
        """What is still being done that a new change must wait for ('' when nothing)."""
        what = [([] if growing else self.creating, "being created"),
                (self.marking, "being marked for deletion"), (self.removing, "being removed")]
        return ", ".join(f"partitions {ps} {doing}" for ps, doing in what if ps)


async def _pending(store: MetadataStore, topic: znodes.TopicAssignment) -> _Pending:
    out = _Pending()
    undeleted = topic.undeleted_partition_count
    if undeleted < 0:
        undeleted = len(topic.partitions)  # counts not recorded yet: nothing is marked
    try:
        children = await store.get_children(znodes.partitions_path(topic.topic))
    except NoNodeError:
        children = []
    out.removing = sorted(int(c) for c in children if c.isdigit() and int(c) not in topic.partitions)
    for p in sorted(p for p in topic.partitions if p >= undeleted):
        try:
            pdata, _ = await store.get(znodes.partition_path(topic.topic, p))
        except NoNodeError:
            out.creating.append(p)
            continue
        (out.marked if znodes.PartitionZnode.from_json(pdata).marked_for_deletion else out.marking).append(p)
    return out


def _check_shrink(
    topic: znodes.TopicAssignment,
    current: int,
    new_total: int,
    ordered: bool,
    assignment: Sequence[Sequence[int]] | None,
) -> None:
    initial = topic.initial_partition_count
    if not ordered:
        raise InvalidPartitionsError(
            f"Topic currently has {current} partitions, which is higher than the requested {new_total}. "
            "(enable.ordered.delivery=false: partitions can only be added; KIP-253 deletion needs it true.)"
        )
    if initial < 0:
        raise InvalidPartitionsError(
            f"The controller has not recorded topic '{topic.topic}''s initial_partition_count yet "
            "(KIP-253); try again."
        )
    if new_total < initial:
        raise InvalidPartitionsError(
            f"Topic was created with {initial} partitions (initial_partition_count): KIP-253 removes "
            f"partitions down to {initial}, not to {new_total}."
        )
    if assignment:
        raise InvalidReplicaAssignmentError(
            f"Decreasing the number of partitions to {new_total} takes no replica assignment, "
            f"but {len(assignment)} were provided."
        )


def _new_assignment(
    topic: znodes.TopicAssignment,
    new_total: int,
    assignment: Sequence[Sequence[int]] | None,
    brokers: Mapping[int, str | None],
    rng: random.Random | None,
    check: PartitionCheck | None,
) -> dict[int, list[int]]:
    """The added partitions' replicas: ``assignment`` checked, or assigned as Kafka does."""
    current = len(topic.partitions)
    rf = len(topic.partitions[0]) if topic.partitions else 1
    added = new_total - current
    if assignment is not None:
        if len(assignment) != added:
            raise InvalidReplicaAssignmentError(
                f"Increasing the number of partitions by {added} but {len(assignment)} assignments provided."
            )
        new = validate_assignment(
            {current + i: list(a) for i, a in enumerate(assignment)},
            brokers,
            first_partition=current,
            replication_factor=rf,
        )
    else:
        order = sorted(brokers)
        first = topic.partitions.get(0, [None])[0]
        start = order.index(first) if first in order else -1
        new = assign_replicas(brokers, added, rf, start_index=start, start_partition_id=current, rng=rng)
    if check is not None:
        check(new)
    return new


# ---- configs -------------------------------------------------------------------------------------


async def get_topic_config(store: MetadataStore, name: str) -> dict[str, str]:
    """The topic's overrides (not the broker defaults)."""
    try:
        data, _ = await store.get(znodes.topic_config_path(name))
    except NoNodeError:
        if await store.exists(znodes.topic_path(name)) is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
        return {}
    return znodes.TopicConfig.from_json(data).config


async def set_topic_config(store: MetadataStore, name: str, config: Mapping[str, Any]) -> dict[str, str]:
    """Replaces the topic's overrides and writes a ``/config/changes`` notification."""
    if await store.exists(znodes.topic_path(name)) is None:
        raise UnknownTopicError(f"Topic '{name}' does not exist.")
    values = validate_topic_configs(config)
    payload = znodes.TopicConfig(values).to_json()
    path = znodes.topic_config_path(name)
    if await store.exists(path) is None:
        try:
            await store.create(path, payload, makepath=True)
        except NodeExistsError:
            await store.set(path, payload)
    else:
        await store.set(path, payload)
    await store.ensure_path(znodes.CONFIG_CHANGES)
    await store.create(
        f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
        znodes.config_change_notification(f"topics/{name}"),
        sequential=True,
    )
    return values


async def get_broker_config(store: MetadataStore, entity: str) -> dict[str, str]:
    """The dynamic configs of ``entity`` (a broker id, or znodes.DEFAULT_BROKER_ENTITY)."""
    try:
        data, _ = await store.get(znodes.broker_config_path(entity))
    except NoNodeError:
        return {}
    return znodes.TopicConfig.from_json(data).config


async def set_broker_config(store: MetadataStore, entity: str, config: Mapping[str, str]) -> None:
    """Replaces ``entity``'s dynamic broker configs (validated by the caller: the broker's
    BrokerConfig knows them) and writes a ``/config/changes`` notification, as Kafka's
    AdminZkClient.changeBrokerConfig."""
    payload = znodes.TopicConfig(dict(config)).to_json()
    path = znodes.broker_config_path(entity)
    if await store.exists(path) is None:
        try:
            await store.create(path, payload, makepath=True)
        except NodeExistsError:
            await store.set(path, payload)
    else:
        await store.set(path, payload)
    await store.ensure_path(znodes.CONFIG_CHANGES)
    await store.create(
        f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
        znodes.config_change_notification(f"brokers/{entity}"),
        sequential=True,
    )


# ---- the leader's ISR changes ---------------------------------------------------------------------


async def update_isr(
    store: MetadataStore, topic: str, partition: int, new_state: znodes.PartitionStateZnode, zk_version: int
) -> int:
    """The leader's conditional write of a new ISR; returns the new zk_version.

    Raises BadVersionError when the state znode is no longer at ``zk_version``
    (the controller moved on: wait for its LeaderAndIsr)."""
    stat = await store.set(
        znodes.partition_state_path(topic, partition), new_state.to_json(), version=zk_version
    )
    return stat.version


async def notify_isr_change(store: MetadataStore, partitions: Sequence[TopicPartition]) -> str:
    """Tells the controller these partitions' ISRs changed (it broadcasts UpdateMetadata)."""
    await store.ensure_path(znodes.ISR_CHANGE)
    return await store.create(
        f"{znodes.ISR_CHANGE}/{znodes.ISR_CHANGE_PREFIX}",
        znodes.isr_change_notification(list(partitions)),
        sequential=True,
    )
