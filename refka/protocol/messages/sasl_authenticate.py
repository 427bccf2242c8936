"""SaslAuthenticate (key 36): one round of a SASL exchange, framed as a Kafka
request (KIP-152).

v1 adds session_lifetime_ms, after which the client must re-authenticate
(KIP-368). v2 is flexible (KIP-482).
"""

from ..api import Api
from ..schema import BYTES, INT16, INT64, STRING, api, field, struct

SaslAuthenticate = Api(
    api(
        36,
        "SaslAuthenticate",
        "0-2",
        flexible="2+",
        request=struct(
            "SaslAuthenticateRequest",
            field("auth_bytes", BYTES, about="The SASL token from the client."),
        ),
        response=struct(
            "SaslAuthenticateResponse",
            field("error_code", INT16),
            field("error_message", STRING, nullable="0+"),
            field("auth_bytes", BYTES, about="The SASL token from the broker."),
            field(
                "session_lifetime_ms",
                INT64,
                "1+",
                default=0,
                about="0: the session does not expire (KIP-368).",
            ),
        ),
    )
)
