#!/bin/sh
# refka in a StatefulSet pod: the properties a pod cannot be given as plain environment
# variables, derived here, then `refka serve` in this process's place (it gets SIGTERM).
#
#   broker.id             the pod's ordinal (refka-2 is broker 2)
#   broker.rack           the zone the init container read from the node's labels (RACK_FILE)
#   advertised.listeners  INTERNAL: the pod's stable name under the headless Service;
#                         EXTERNAL: EXTERNAL_HOST (else the node's address, HOST_IP) and
#                         EXTERNAL_PORT (else EXTERNAL_PORT_BASE + the ordinal: the broker's
#                         NodePort)
#
# Everything else comes from the pod's REFKA_ variables (listeners, zookeeper.connect,
# log.dirs, ...), which `refka serve` reads itself.
set -eu

ordinal="${POD_NAME##*-}"
case "$ordinal" in
  ''|*[!0-9]*) echo "refka-start: no ordinal at the end of POD_NAME=$POD_NAME" >&2; exit 2 ;;
esac
export REFKA_BROKER_ID="$ordinal"

rack=""
if [ -n "${RACK_FILE:-}" ] && [ -s "$RACK_FILE" ]; then
  rack="$(cat "$RACK_FILE")"
fi
export REFKA_BROKER_RACK="$rack"

internal_host="$POD_NAME.$HEADLESS_SERVICE.$POD_NAMESPACE.svc.$CLUSTER_DOMAIN"
external_host="${EXTERNAL_HOST:-${HOST_IP:?neither EXTERNAL_HOST nor HOST_IP is set}}"
external_port="${EXTERNAL_PORT:-$((EXTERNAL_PORT_BASE + ordinal))}"
export REFKA_ADVERTISED_LISTENERS="INTERNAL://$internal_host:$INTERNAL_PORT,EXTERNAL://$external_host:$external_port"

echo "refka-start: broker.id=$REFKA_BROKER_ID broker.rack=${REFKA_BROKER_RACK:-none}" \
     "advertised.listeners=$REFKA_ADVERTISED_LISTENERS" >&2
exec refka serve --admin-host 0.0.0.0 --admin-port "$ADMIN_PORT" "$@"
