"""InitProducerId (key 22): a producer id and epoch for an idempotent or
transactional producer (KIP-98).

v1 is the same as v0; a throttled answer is sent before throttling (KIP-219).
v2 is flexible (KIP-482). v3 adds producer_id and producer_epoch to the
request so a producer can bump its epoch without losing its id (KIP-360).
v4 may answer PRODUCER_FENCED (KIP-588). v5 may answer TRANSACTION_ABORTABLE
(KIP-890).
"""

from ..api import Api
from ..schema import INT16, INT32, INT64, STRING, api, field, struct

InitProducerId = Api(
    api(
        22,
        "InitProducerId",
        "0-5",
        flexible="2+",
        request=struct(
            "InitProducerIdRequest",
            field(
                "transactional_id",
                STRING,
                nullable="0+",
                about="Null for an idempotent producer without transactions.",
            ),
            field(
                "transaction_timeout_ms",
                INT32,
                about="How long a transaction may stay open; unused without transactional_id.",
            ),
            field(
                "producer_id",
                INT64,
                "3+",
                default=-1,
                about="The producer's current id, or -1 if it has none (KIP-360).",
            ),
            field(
                "producer_epoch",
                INT16,
                "3+",
                default=-1,
                about="The producer's current epoch, or -1 if it has none (KIP-360).",
            ),
        ),
        response=struct(
            "InitProducerIdResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
            field(
                "producer_id",
                INT64,
                default=-1,
                about="The id to stamp on the producer's batches; -1 on error.",
            ),
            field("producer_epoch", INT16, about="The epoch to stamp with producer_id; -1 on error."),
        ),
    )
)
