"""The Kafka wire codec: no I/O, no asyncio.

What handlers use is re-exported here; helpers stay private to their modules.
"""

from .api import Api, UnsupportedVersion, join
from .codec import DecodeError, EncodedArray, EncodeError
from .errors import ErrorCode
from .framing import BadFrame, FrameTooLarge, frame
from .headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    peek_request_header,
)

__all__ = [
    "Api",
    "BadFrame",
    "DecodeError",
    "EncodeError",
    "EncodedArray",
    "ErrorCode",
    "FrameTooLarge",
    "RequestHeader",
    "UnsupportedVersion",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "frame",
    "join",
    "peek_request_header",
]
