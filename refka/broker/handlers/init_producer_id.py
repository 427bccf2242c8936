"""InitProducerId (key 22), v0-v5.

Behavior:
- An idempotent producer (transactional_id null) gets a new producer id and
  epoch 0 from any broker, as Kafka's transaction coordinator answers a null
  transactional id. The v3+ producer_id/producer_epoch of a producer that
  bumps its epoch (KIP-360) are not needed for that: it gets a new id too.
- Ids come from blocks of 1000 that the broker claims in the metadata store
  (``/latest_producer_id_block``, refka/controller/producer_ids.py): unique
  across the brokers of a cluster and across restarts. With no store session
  (a broker not wired to a controller) or a store error, the answer is
  COORDINATOR_NOT_AVAILABLE, retriable: librdkafka, the Java client and
  kafka-python ask again.
- Transactions are not served: a transactional_id is refused with
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Produce and FindCoordinator
  refuse it. librdkafka and the Java client raise it at once as a fatal
  error, where a retriable error would have them retry until their timeout.
- transaction_timeout_ms is ignored (it only matters to transactions).

Version notes:
- v0 KIP-98. v1 same (throttling after the answer, KIP-219). v2 flexible.
- v3 producer_id + producer_epoch in the request (KIP-360).
- v4 may answer PRODUCER_FENCED (KIP-588), v5 TRANSACTION_ABORTABLE
  (KIP-890): both only for transactional ids, which refka refuses.
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.init_producer_id import InitProducerId

from ..controller_side import ProducerIdsExhaustedError, StoreError
from ..logging import get_logger
from ..registry import handles

log = get_logger("refka.producer_ids")

Resp = InitProducerId.Response


@handles(InitProducerId.key, 0, 5)
async def handle_init_producer_id(ctx, req):
    if req.transactional_id is not None:
        ctx.not_served("transactions: InitProducerId with a transactional id",
                       ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return Resp(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
    broker = ctx.broker
    side = broker.controller_side
    if side is None:
        return Resp(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
    try:
        pid = await broker.producer_ids.generate(side.session)
    except StoreError as e:
        log.warning("producer_id_block_not_claimed", broker=broker.node_id, error=str(e))
        return Resp(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
    except ProducerIdsExhaustedError as e:  # as Kafka: a KafkaException, UNKNOWN_SERVER_ERROR
        log.error("producer_ids_exhausted", broker=broker.node_id, error=str(e))
        return Resp(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, producer_id=-1, producer_epoch=-1)
    return Resp(error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
