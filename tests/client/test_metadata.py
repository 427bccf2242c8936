"""The client's metadata cache (refka/client/metadata.py) and ClusterClient.refresh
(refka/client/cluster.py) with built Metadata answers: KIP-232's rule that an answer
older than the cache is discarded whole and asked of another broker, and what is not
older (a re-created topic or partition, a stock broker's -1s, a KIP-951 hint)."""

from __future__ import annotations

from typing import Any

import pytest

from refka.client.cluster import ClusterClient
from refka.client.metadata import ClusterMetadata
from refka.protocol.messages.metadata import Metadata

pytestmark = pytest.mark.timeout(30)

MR = Metadata.Response
MT = MR.MetadataResponseTopic
MP = MT.MetadataResponsePartition


def answer(*, controller: tuple[int, int] | None = (1, 5), topic_epoch: int = 7, leader_epochs: tuple[int, ...] = (3, 3),
           partition_epochs: tuple[int, ...] | None = None, topic_id: bytes = b"id-t".ljust(16, b"-"),
           leader: int = 0, brokers: tuple[int, ...] = (0, 1), name: str = "t") -> Any:
    pe = partition_epochs or (-1,) * len(leader_epochs)
    return MR(
        brokers=[MR.MetadataResponseBroker(node_id=n, host="h", port=9000 + n) for n in brokers],
        topics=[MT(error_code=0, name=name, topic_id=topic_id, topic_epoch=topic_epoch, partitions=[
            MP(error_code=0, partition_index=i, leader_id=leader, leader_epoch=e, partition_epoch=pe[i])
            for i, e in enumerate(leader_epochs)])],
        controller_epochs=None if controller is None else MR.ControllerEpochs(
            controller_epoch=controller[0], controller_metadata_epoch=controller[1]))


def cached(**kw: Any) -> ClusterMetadata:
    md = ClusterMetadata()
    assert md.apply(answer(**kw))
    return md


def test_an_answer_with_older_controller_epochs_is_discarded_whole():
    md = cached(controller=(2, 0))
    assert not md.apply(answer(controller=(1, 9), leader=1, brokers=(0, 1, 2), name="other"))
    assert "other" not in md.topics and 2 not in md.brokers and md.stale_answers == 1
    assert md.apply(answer(controller=(2, 0), leader=1))  # equal: the same broadcast
    assert md.apply(answer(controller=(2, 1), leader=1))
    assert md.controller_epochs == (2, 1)


def test_a_smaller_topic_epoch_is_older():
    md = cached(topic_epoch=7)
    assert not md.apply(answer(topic_epoch=6, leader_epochs=(9, 9)))
    assert md.topics["t"].topic_epoch == 7


def test_a_smaller_leader_epoch_of_the_same_topic_is_older():
    md = cached(leader_epochs=(3, 3))
    assert not md.apply(answer(leader_epochs=(3, 2), leader=1))
    assert md.leader_for("t", 1) == 0
    assert md.apply(answer(leader_epochs=(3, 4), leader=1))
    assert md.leader_for("t", 1) == 1


def test_a_larger_topic_epoch_is_a_new_topic_whose_leader_epochs_start_again():
    md = cached(topic_epoch=7, leader_epochs=(5, 5))
    assert md.apply(answer(topic_epoch=8, leader_epochs=(0, 0), topic_id=b"id-t2".ljust(16, b"-")))
    assert md.topics["t"].topic_epoch == 8 and md.topics["t"].partitions[0].leader_epoch == 0


def test_a_partition_created_again_has_a_larger_partition_epoch_and_starts_its_leader_epochs_again():
    md = cached(leader_epochs=(5, 5), partition_epochs=(10, 11))
    assert md.apply(answer(leader_epochs=(5, 0), partition_epochs=(10, 12)))
    assert not md.apply(answer(leader_epochs=(5, 9), partition_epochs=(10, 11)))  # the old partition
    assert md.topics["t"].partitions[1].partition_epoch == 12


def test_a_stock_brokers_answer_is_never_compared_on_unknown_fields():
    md = cached(controller=None, topic_epoch=-1, leader_epochs=(3, 3))
    assert md.apply(answer(controller=None, topic_epoch=-1, leader_epochs=(-1, -1)))  # Metadata < v7
    md = cached(controller=None, topic_epoch=-1, leader_epochs=(3, 3))
    assert not md.apply(answer(controller=None, topic_epoch=-1, leader_epochs=(2, 3)))
    # re-created on a stock broker: another topic id, nothing to order it by
    assert md.apply(answer(controller=None, topic_epoch=-1, leader_epochs=(0, 0),
                           topic_id=b"id-new".ljust(16, b"-")))


def test_a_kip951_hint_is_kept_over_older_answers_without_calling_them_stale():
    md = cached(leader_epochs=(3, 3))
    assert md.update_leader("t", 0, 1, 4, None)
    assert md.apply(answer(leader_epochs=(3, 3)))  # brokers lag the hint: taken, the hint kept
    assert md.leader_for("t", 0) == 1 and md.topics["t"].partitions[0].hinted
    assert md.apply(answer(leader_epochs=(4, 3), leader=1))  # caught up: the answer's
    assert not md.topics["t"].partitions[0].hinted


def test_behind_says_whether_the_cache_has_caught_up_with_an_offsets_epochs():
    md = cached(topic_epoch=7, leader_epochs=(3, 3))
    assert not md.behind("t", 0, 7, 3) and not md.behind("t", 0, 7, 2) and not md.behind("t", 0, -1, -1)
    assert md.behind("t", 0, 7, 4)
    assert md.behind("t", 0, 8, 0)  # committed under a newer topic than the cache knows
    assert not md.behind("t", 0, 6, 9)  # the cache has a newer topic: nothing to wait for
    assert md.behind("absent", 0, -1, -1) and md.behind("t", 5, 7, 0)
    md.forget(["t"])
    assert "t" not in md.topics


class _Conn:
    def __init__(self, resp: Any) -> None:
        self.resp, self.closed = resp, False

    async def request(self, api: Any, body: Any, version: int | None = None, **_: Any) -> Any:
        return self.resp


async def test_refresh_asks_the_next_broker_when_an_answer_is_older_and_says_when_all_were():
    cc = ClusterClient("127.0.0.1:1", "test", request_timeout=1)
    cc.metadata.apply(answer(controller=(3, 3), brokers=(0, 1, 2)))
    answers = {0: answer(controller=(3, 1)), 1: answer(controller=(3, 4), leader=2), 2: answer(controller=(3, 5))}

    async def connection(node_id: int) -> _Conn:
        return _Conn(answers[node_id])

    cc.connection = connection  # type: ignore[method-assign]
    assert await cc.refresh(["t"])
    assert cc.metadata.controller_epochs == (3, 4) and cc.metadata.leader_for("t", 0) == 2
    answers[1] = answers[2] = answers[0]
    assert not await cc.refresh(["t"])
    assert cc.metadata.stale_answers == 4 and cc.metadata.controller_epochs == (3, 4)
