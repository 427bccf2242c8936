"""DescribeCluster (key 60), v0-v2.

Behavior:
- cluster_id, controller_id and the live brokers with host, port (on the
  listener the request came in on) and rack, from the metadata cache.
- endpoint_type (v1) 1 = brokers is served; 2 = controllers (KRaft) is
  UNSUPPORTED_ENDPOINT_TYPE: refka's controller is a broker role.
- cluster_authorized_operations, when asked (include_cluster_authorized_operations):
  every operation on a cluster, as Kafka answers with no authorizer
  (acl_operations.py); not asked: -2^31.

Version notes:
- v0 KIP-700. v1 endpoint_type (KIP-919). v2 include_fenced_brokers / is_fenced
  (KIP-1073): refka has no fenced brokers, every listed broker is live.
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.describe_cluster import DescribeCluster

from .. import acl_operations
from ..registry import handles

Resp = DescribeCluster.Response
RBroker = Resp.DescribeClusterBroker


@handles(DescribeCluster.key, 0, 2)
def handle_describe_cluster(ctx, req):
    broker = ctx.broker
    cache = broker.metadata
    if ctx.api_version >= 1 and req.endpoint_type != 1:
        return Resp(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, error_message="only brokers are served",
                    endpoint_type=req.endpoint_type, cluster_id=cache.cluster_id or "", controller_id=-1,
                    brokers=[], cluster_authorized_operations=acl_operations.NOT_ASKED)
    ops = acl_operations.CLUSTER if req.include_cluster_authorized_operations else acl_operations.NOT_ASKED
    brokers = []
    for b in sorted(cache.brokers.values(), key=lambda b: b.node_id):
        ep = b.endpoint(ctx.conn.listener)
        if ep is not None:
            brokers.append(RBroker(broker_id=b.node_id, host=ep[0], port=ep[1], rack=b.rack, is_fenced=False))
    return Resp(error_code=ErrorCode.NONE, endpoint_type=1, cluster_id=cache.cluster_id or "",
                controller_id=cache.controller_id, brokers=brokers, cluster_authorized_operations=ops)
