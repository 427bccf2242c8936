"""SaslHandshake (key 17): pick a SASL mechanism; the answer lists the
enabled ones.

v0 is followed by raw SASL tokens on the connection. v1 is followed by
SaslAuthenticate requests instead (KIP-152). Never flexible.
"""

from ..api import Api
from ..schema import INT16, STRING, api, array, field, struct

SaslHandshake = Api(
    api(
        17,
        "SaslHandshake",
        "0-1",
        request=struct(
            "SaslHandshakeRequest",
            field("mechanism", STRING, about='e.g. "PLAIN", "SCRAM-SHA-256".'),
        ),
        response=struct(
            "SaslHandshakeResponse",
            field("error_code", INT16),
            field("mechanisms", array(STRING), about="The mechanisms the broker has enabled."),
        ),
    )
)
