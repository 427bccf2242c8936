"""ApiVersions (key 18), v0-v4.

Behavior:
- Answers from the handler registry: every API with a handler, at the versions
  it serves. Inter-broker APIs (LeaderAndIsr, UpdateMetadata, StopReplica,
  ControlledShutdown) are listed too, as Kafka's ZooKeeper-mode brokers do.
- A version we do not serve gets UNSUPPORTED_VERSION in a v0 answer (written by
  the connection, KIP-511), so old and new clients can both downgrade.

Version notes:
- v1: throttle_time_ms.
- v3: flexible; client software name and version (KIP-511), kept in the connection's
  recording (recording.py); feature tags (KIP-584, empty). A name or version that is
  empty or not of KIP-511's form (letters, digits, '.' and '-', starting and ending
  with a letter or digit) is INVALID_REQUEST with no API listed, as Kafka's
  ApiVersionsRequest.isValid decides.
"""

import re

from refka.protocol import ErrorCode
from refka.protocol.messages.api_versions import ApiVersions

from ..registry import api_versions_response, handles

Resp = ApiVersions.Response
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@handles(ApiVersions.key, 0, 4)
def handle_api_versions(ctx, req):
    rec = ctx.conn.recording
    if rec is not None:  # the connection's identity, even with recording off
        rec.client_id = ctx.client_id
        if ctx.api_version >= 3:  # KIP-511
            rec.software_name = req.client_software_name
            rec.software_version = req.client_software_version
    if ctx.api_version >= 3 and not (SOFTWARE_NAME_VERSION.fullmatch(req.client_software_name or "")
                                     and SOFTWARE_NAME_VERSION.fullmatch(req.client_software_version or "")):
        return Resp(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    return api_versions_response(ErrorCode.NONE)
