"""ControlledShutdown (key 7), v0-v3: a broker asks the controller to move
leadership away from it before it stops.

Behavior:
- Only from a broker (inter_broker.py: the inter-broker listener, or a request
  carrying the registered controller's token, which only brokers read from
  /controller): else CLUSTER_AUTHORIZATION_FAILED, as Kafka answers a client
  without ClusterAction. Advertised in ApiVersions on every listener, as Kafka's
  ZooKeeper-mode brokers do.
- Served by the active controller; any other broker answers NOT_CONTROLLER.
- The controller (controller.py, _on_controlled_shutdown) marks the broker as
  shutting down, elects another live ISR replica for every partition it leads
  (leader epoch + 1, the broker out of the ISR), takes it out of the ISR of
  partitions it follows, and tells the replicas (LeaderAndIsr, UpdateMetadata,
  StopReplica). remaining_partitions lists the replicated partitions it still
  leads (no other live ISR replica); partitions with one replica never count,
  as in Kafka.
- BROKER_NOT_AVAILABLE for a broker the controller does not know live;
  STALE_BROKER_EPOCH (v2+) for a broker_epoch that is not the registered one.
- The stopping side (ControllerSide.controlled_shutdown) retries per
  controlled.shutdown.max.retries / controlled.shutdown.retry.backoff.ms.

Version notes:
- v0 request header v0 (no client id). v1 same body. v2 broker_epoch
  (KIP-380). v3 flexible (KIP-482; refka's controller_token).
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.controlled_shutdown import ControlledShutdown

from ..registry import handles

Resp = ControlledShutdown.Response
RPart = Resp.RemainingPartition


@handles(ControlledShutdown.key, 0, 3, inter_broker=True)
async def handle_controlled_shutdown(ctx, req):
    refused = await ctx.broker.inter_broker.admit_controlled_shutdown(ctx, req.broker_id, req.controller_token)
    if refused != ErrorCode.NONE:
        return Resp(error_code=refused, remaining_partitions=[])
    side = ctx.broker.controller_side
    controller = side.active_controller if side is not None else None
    if controller is None:
        return Resp(error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=[])
    broker_epoch = req.broker_epoch if ctx.api_version >= 2 else -1
    error, remaining = await controller.controlled_shutdown(req.broker_id, broker_epoch)
    return Resp(
        error_code=error,
        remaining_partitions=[RPart(topic_name=t, partition_index=p) for t, p in sorted(remaining)],
    )
