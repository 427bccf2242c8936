"""Znode paths and JSON payloads, as Kafka writes them and as the seeds extend them.

Every payload is a small dataclass with ``to_json() -> bytes`` and
``from_json(bytes)``; key names are Kafka's (and the seeds'), byte for byte,
so a ZooKeeper shared with tools that know Kafka's layout reads naturally.

::

    /cluster/id                                  {"version":"1","id":"..."}
    /controller                                  {"version":2,"brokerid":1,"timestamp":"...",
                                                  "controller_token":"..."}                     ephemeral
    /controller_epoch                            3                                              (text)
    /partition_epoch                             41                                             (text; refka)
    /brokers/ids/<id>                            BrokerInfo                                     ephemeral
    /brokers/topics/<t>                          TopicAssignment (+ KIP-253 counts, KIP-232 topic_epoch)
    /brokers/topics/<t>/partitions/<p>           PartitionZnode (KIP-232 / KIP-253)
    /brokers/topics/<t>/partitions/<p>/state     PartitionStateZnode
    /config/topics/<t>                           {"version":1,"config":{...}}
    /config/changes/config_change_<seq>          {"version":2,"entity_path":"topics/<t>"}
    /admin/delete_topics/<t>                     (empty)
    /isr_change_notification/isr_change_<seq>    {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /latest_producer_id_block                    {"version":1,"broker":0,"block_start":"0","block_end":"999"}

Where KIP-232's epochs live. ``partition_epoch`` is in the partition znode,
as seed 004 defines it. Seed 002 adds ``topic_epoch`` without saying where it
is kept, so refka keeps it in the topic znode as ``"topic_epoch"``. Both are
drawn by the controller from one cluster-wide counter, ``/partition_epoch``
(its value is KIP-253's ``max_partition_epoch``): a topic or partition that is
deleted and created again always gets larger epochs than before, which is
what lets a client tell the new one from the old.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from refka.common import Endpoint, TopicPartition

# ---- paths ----------------------------------------------------------------------------------

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
PARTITION_EPOCH = "/partition_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
# Dynamic broker configs (Kafka's ZooKeeper mode): /config/brokers/<default> holds the
# cluster-wide defaults, /config/brokers/<id> one broker's; as a topic's, {"version":1,"config":{}}.
CONFIG_BROKERS = "/config/brokers"
DEFAULT_BROKER_ENTITY = "<default>"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Created at start-up so watches on their children can be set.
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    ISR_CHANGE,
    "/cluster",
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(entity: str) -> str:
    """``entity``: a broker id, or DEFAULT_BROKER_ENTITY for the cluster-wide defaults."""
    return f"{CONFIG_BROKERS}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _loads(data: bytes) -> dict[str, Any]:
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError(f"znode payload is not a JSON object: {data[:80]!r}")
    return doc


# ---- topic ids: Kafka's Uuid text form ------------------------------------------------------


def new_topic_id() -> bytes:
    """A random topic id that is neither zero nor Kafka's reserved metadata id."""
    while True:
        b = uuid.uuid4().bytes
        if b != b"\x00" * 16 and b != b"\x00" * 15 + b"\x01":
            return b


def topic_id_to_str(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id).decode("ascii").rstrip("=")


def topic_id_from_str(s: str) -> bytes:
    b = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(b) != 16:
        raise ValueError(f"not a topic id: {s!r}")
    return b


# ---- /brokers/ids/<id> -----------------------------------------------------------------------

@dataclass(frozen=True)
class BrokerInfo:
    """``/brokers/ids/<id>``: Kafka's version 5 broker registration.

    ``{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
    "endpoints":["PLAINTEXT://127.0.0.1:9092"],"jmx_port":-1,"port":9092,
    "host":"127.0.0.1","version":5,"timestamp":"1700000000000","rack":null}``

    ``host``/``port`` are the first PLAINTEXT endpoint's, as Kafka writes them
    for old clients (null and -1 without one). The broker epoch is not in the
    payload: it is the znode's czxid (``stat.czxid``), as in Kafka.
    """

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp: str = field(default_factory=_now_ms)
    features: dict[str, Any] = field(default_factory=dict)

    VERSION = 5

    @property
    def path(self) -> str:
        return broker_path(self.broker_id)

    def endpoint(self, listener: str | None = None) -> Endpoint:
        """The endpoint of ``listener``, or the first one."""
        if listener is not None:
            for ep in self.endpoints:
                if ep.listener == listener:
                    return ep
        if not self.endpoints:
            raise ValueError(f"broker {self.broker_id} has no endpoints")
        return self.endpoints[0]

    def to_json(self) -> bytes:
        plain = next((ep for ep in self.endpoints if ep.security_protocol == "PLAINTEXT"), None)
        return _dumps(
            {
                "features": self.features,
                "listener_security_protocol_map": {
                    ep.listener: ep.security_protocol for ep in self.endpoints
                },
                "endpoints": [str(ep) for ep in self.endpoints],
                "jmx_port": self.jmx_port,
                "port": plain.port if plain else -1,
                "host": plain.host if plain else None,
                "version": self.VERSION,
                "timestamp": self.timestamp,
                "rack": self.rack,
            }
        )

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> BrokerInfo:
        doc = _loads(data)
        protocols = doc.get("listener_security_protocol_map") or {}
        if "endpoints" in doc:
            endpoints = tuple(Endpoint.parse(e, protocols) for e in doc["endpoints"])
        else:  # version 1: host and port only
            endpoints = (Endpoint("PLAINTEXT", doc["host"], int(doc["port"])),)
        return cls(
            broker_id=broker_id,
            endpoints=endpoints,
            rack=doc.get("rack"),
            jmx_port=int(doc.get("jmx_port", -1)),
            timestamp=str(doc.get("timestamp", "")),
            features=dict(doc.get("features") or {}),
        )


# ---- /controller, /controller_epoch, /partition_epoch, /cluster/id -------------------------


@dataclass(frozen=True)
class ControllerZnode:
    """``/controller``: ``{"version":2,"brokerid":1,"timestamp":"1700000000000"}`` (ephemeral),
    and refka's ``"controller_token"``: a random number the winner of the election
    writes with it, which brokers take from here to tell the controller's requests (and
    each other's ControlledShutdown) from a client's (broker/inter_broker.py). Kept as
    text, like the timestamp, since it does not fit a JavaScript number. Absent (-1)
    when written by an older refka.
    """

    broker_id: int
    timestamp: str = field(default_factory=_now_ms)
    controller_token: int = -1

    VERSION = 2

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {"version": self.VERSION, "brokerid": self.broker_id, "timestamp": self.timestamp}
        if self.controller_token >= 0:
            doc["controller_token"] = str(self.controller_token)
        return _dumps(doc)

    @classmethod
    def from_json(cls, data: bytes) -> ControllerZnode:
        doc = _loads(data)
        return cls(broker_id=int(doc["brokerid"]), timestamp=str(doc.get("timestamp", "")),
                   controller_token=int(doc.get("controller_token", -1)))


def encode_int(value: int) -> bytes:
    """``/controller_epoch`` and ``/partition_epoch`` hold a bare integer as text, like Kafka."""
    return str(int(value)).encode()


def decode_int(data: bytes) -> int:
    return int(data.decode().strip())


@dataclass(frozen=True)
class ClusterId:
    """``/cluster/id``: ``{"version":"1","id":"..."}`` (Kafka writes the version as a string)."""

    id: str

    def to_json(self) -> bytes:
        return _dumps({"version": "1", "id": self.id})

    @classmethod
    def from_json(cls, data: bytes) -> ClusterId:
        return cls(id=str(_loads(data)["id"]))

    @classmethod
    def generate(cls) -> ClusterId:
        return cls(topic_id_to_str(uuid.uuid4().bytes))


# ---- /brokers/topics/<t> --------------------------------------------------------------------


def _int_keys(d: dict[str, Any]) -> dict[int, Any]:
    return {int(k): v for k, v in d.items()}


def _str_keys(d: dict[int, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in sorted(d.items())}


@dataclass
class TopicAssignment:
    """``/brokers/topics/<t>``: Kafka's version 3 plus KIP-253's counts and KIP-232's topic_epoch.

    ``{"version":3,"topic_id":"wHg3f6nXRr2dLUIk-1NbWw","partitions":{"0":[1,2],"1":[2,3]},
    "adding_replicas":{},"removing_replicas":{},"initial_partition_count":2,
    "undeleted_partition_count":2,"topic_epoch":7}``

    The counts and epoch are -1 until written; the controller fills in what is
    missing when it first sees the topic (KIP-253 change 1).
    """

    topic: str
    topic_id: bytes
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)
    initial_partition_count: int = -1
    undeleted_partition_count: int = -1
    topic_epoch: int = -1

    VERSION = 3

    @property
    def path(self) -> str:
        return topic_path(self.topic)

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "version": self.VERSION,
            "topic_id": topic_id_to_str(self.topic_id),
            "partitions": _str_keys(self.partitions),
            "adding_replicas": _str_keys(self.adding_replicas),
            "removing_replicas": _str_keys(self.removing_replicas),
        }
        if self.initial_partition_count >= 0:
            doc["initial_partition_count"] = self.initial_partition_count
        if self.undeleted_partition_count >= 0:
            doc["undeleted_partition_count"] = self.undeleted_partition_count
        if self.topic_epoch >= 0:
            doc["topic_epoch"] = self.topic_epoch
        return _dumps(doc)

    @classmethod
    def from_json(cls, topic: str, data: bytes) -> TopicAssignment:
        doc = _loads(data)
        tid = doc.get("topic_id")
        return cls(
            topic=topic,
            topic_id=topic_id_from_str(tid) if tid else b"\x00" * 16,
            partitions={p: [int(r) for r in rs] for p, rs in _int_keys(doc.get("partitions") or {}).items()},
            adding_replicas=_int_keys(doc.get("adding_replicas") or {}),
            removing_replicas=_int_keys(doc.get("removing_replicas") or {}),
            initial_partition_count=int(doc.get("initial_partition_count", -1)),
            undeleted_partition_count=int(doc.get("undeleted_partition_count", -1)),
            topic_epoch=int(doc.get("topic_epoch", -1)),
        )


# ---- /brokers/topics/<t>/partitions/<p> ------------------------------------------------------


@dataclass
class PartitionZnode:
    """``/brokers/topics/<t>/partitions/<p>`` (seed 004; empty in Kafka).

    ``{"version":1,"partition_epoch":12,"leaderEpochAfterCreation":{"0":4,"1":2},
    "leaderEpochBeforeDeletion":{}}``

    ``leaderEpochAfterCreation``: for a partition added by an expansion, each
    older partition's leader epoch before the controller bumped it (records
    after that epoch were produced with the new count). A non-empty
    ``leaderEpochBeforeDeletion`` marks the partition for deletion.
    """

    partition_epoch: int
    leader_epoch_after_creation: dict[int, int] = field(default_factory=dict)
    leader_epoch_before_deletion: dict[int, int] = field(default_factory=dict)

    VERSION = 1

    @property
    def marked_for_deletion(self) -> bool:
        return bool(self.leader_epoch_before_deletion)

    def to_json(self) -> bytes:
        return _dumps(
            {
                "version": self.VERSION,
                "partition_epoch": self.partition_epoch,
                "leaderEpochAfterCreation": _str_keys(self.leader_epoch_after_creation),
                "leaderEpochBeforeDeletion": _str_keys(self.leader_epoch_before_deletion),
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> PartitionZnode:
        if not data:  # a znode written by Kafka: no refka payload yet
            return cls(partition_epoch=-1)
        doc = _loads(data)
        return cls(
            partition_epoch=int(doc.get("partition_epoch", -1)),
            leader_epoch_after_creation=_int_keys(doc.get("leaderEpochAfterCreation") or {}),
            leader_epoch_before_deletion=_int_keys(doc.get("leaderEpochBeforeDeletion") or {}),
        )


# ---- /brokers/topics/<t>/partitions/<p>/state -----------------------------------------------

NO_LEADER = -1
LEADER_DURING_DELETE = -2  # UpdateMetadata's leader for a partition being deleted


@dataclass(frozen=True)
class PartitionStateZnode:
    """``.../partitions/<p>/state``: Kafka's LeaderAndIsr znode.

    ``{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}``
    plus ``"leader_recovery_state":1`` while recovering from an unclean
    election (KIP-704), omitted otherwise as Kafka does. The znode's version
    is the ``zk_version`` LeaderAndIsr carries, and the leader's conditional
    ISR updates check it.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0

    VERSION = 1

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": self.VERSION,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state:
            doc["leader_recovery_state"] = self.leader_recovery_state
        return _dumps(doc)

    @classmethod
    def from_json(cls, data: bytes) -> PartitionStateZnode:
        doc = _loads(data)
        return cls(
            leader=int(doc["leader"]),
            leader_epoch=int(doc["leader_epoch"]),
            isr=tuple(int(r) for r in doc["isr"]),
            controller_epoch=int(doc["controller_epoch"]),
            leader_recovery_state=int(doc.get("leader_recovery_state", 0)),
        )


# ---- /config, /admin, notifications ------------------------------------------------------------


@dataclass
class TopicConfig:
    """``/config/topics/<t>``: ``{"version":1,"config":{"retention.ms":"1000"}}`` (values are
    strings); ``/config/brokers/<entity>`` has the same form."""

    config: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return _dumps({"version": 1, "config": {k: str(v) for k, v in sorted(self.config.items())}})

    @classmethod
    def from_json(cls, data: bytes) -> TopicConfig:
        if not data:
            return cls()
        return cls(config={k: str(v) for k, v in (_loads(data).get("config") or {}).items()})


def config_change_notification(entity_path: str) -> bytes:
    """``/config/changes/config_change_<seq>``: ``{"version":2,"entity_path":"topics/<t>"}``."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    return str(_loads(data)["entity_path"])


def isr_change_notification(partitions: list[TopicPartition]) -> bytes:
    """``/isr_change_notification/isr_change_<seq>``: ``{"version":1,"partitions":[{"topic":"t","partition":0}]}``."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(data: bytes) -> list[TopicPartition]:
    return [(str(e["topic"]), int(e["partition"])) for e in _loads(data).get("partitions") or []]


# ---- /latest_producer_id_block ---------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: the last block of producer ids a broker claimed,
    ``{"version":1,"broker":0,"block_start":"0","block_end":"999"}`` (ids as strings and
    the end inclusive, as Kafka writes them)."""

    broker_id: int
    block_start: int
    block_end: int

    def to_json(self) -> bytes:
        return _dumps({"version": 1, "broker": self.broker_id, "block_start": str(self.block_start),
                       "block_end": str(self.block_end)})

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdBlock:
        doc = _loads(data)
        return cls(int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"]))
