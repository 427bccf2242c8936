"""The init container of a refka pod: writes the zone of the pod's node (the node's
``topology.kubernetes.io/zone`` label, or ZONE_LABEL) into the file named by the first
argument, which refka-start.sh reads as ``broker.rack``.

A pod cannot read its node's labels through the downward API, so this asks the API
server (GET /api/v1/nodes/NODE_NAME) with the pod's service-account token; the
ClusterRole ``refka-node-reader`` lets it. A node without the label stops the pod here
(exit 1, saying so), rather than starting a broker without a rack: set ZONE_OPTIONAL=true
for a cluster whose nodes have no zones.

Only the standard library: it runs in refka's image.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.request
from pathlib import Path

ACCOUNT = Path(os.environ.get("SERVICE_ACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount"))


def node_zone(node: dict, label: str) -> str:
    return str(node.get("metadata", {}).get("labels", {}).get(label, ""))


def read_node(name: str) -> dict:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    context = ssl.create_default_context(cafile=str(ACCOUNT / "ca.crt"))
    token = (ACCOUNT / "token").read_text().strip()
    request = urllib.request.Request(f"https://{host}:{port}/api/v1/nodes/{name}",
                                     headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return json.load(answer)


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    name = os.environ["NODE_NAME"]
    label = os.environ.get("ZONE_LABEL", "topology.kubernetes.io/zone")
    zone = node_zone(read_node(name), label)
    if not zone and os.environ.get("ZONE_OPTIONAL", "false").lower() != "true":
        print(f"node-zone: node {name} has no {label} label; label it, or set ZONE_OPTIONAL=true",
              file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(zone)
    tmp.replace(out)
    print(f"node-zone: node {name} is in zone {zone or '(none)'} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
