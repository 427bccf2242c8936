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
  recording (recording.py); feature tags (KIP-584, empty).
"""

from refka.protocol import ErrorCode
from refka.protocol.messages.api_versions import ApiVersions

from ..registry import api_versions_response, handles


@handles(ApiVersions.key, 0, 4)
def handle_api_versions(ctx, req):
    rec = ctx.conn.recording
    if rec is not None:  # the connection's identity, even with recording off
        rec.client_id = ctx.client_id
        if ctx.api_version >= 3:  # KIP-511
            rec.software_name = req.client_software_name
            rec.software_version = req.client_software_version
    return api_versions_response(ErrorCode.NONE)
