"""deploy/k8s rendered by kustomize and checked offline: every overlay against the
Kubernetes 1.30 schemas and the newest ones kubernetes-validate bundles (strict: an
unknown field fails), then what breaks a lab without an error anywhere: broker ids,
advertised names, racks, the ZooKeeper connect string, probes, volumes, the image's
user, the grace period of a controlled shutdown.

The pod's own commands are run here where that is cheap: refka-start.sh with a stand-in
``refka`` that prints what it was given (the real one runs in test_pod_runtime.py and in
the netns cluster test), ZooKeeper's myid line with a stand-in entrypoint.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from refka.broker.config import DEFAULTS, BrokerConfig, parse_listeners
from tests.deploy.manifests import (
    BASE,
    KIND_CLUSTER,
    OVERLAYS,
    SERVICEMONITOR,
    SMOKE,
    container,
    dockerfile_stages,
    find,
    image_env,
    kustomize_unavailable,
    last,
    load,
    named_port,
    of_kind,
    pod_env,
    render,
)

pytestmark = pytest.mark.skipif(kustomize_unavailable() is not None, reason=str(kustomize_unavailable()))

KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
# Custom resources the bundled schemas do not know, and what of them is checked instead.
CUSTOM = {("monitoring.coreos.com/v1", "ServiceMonitor")}
# REFKA_ variables that are refka's command's, not broker properties.
CLI_VARIABLES = {"REFKA_LOG_LEVEL", "REFKA_ADMIN_TOKEN"}
NAMESPACE = "refka"


def with_servicemonitor(tmp_path: Path) -> Path:
    """The base with the optional component, as an overlay would add it."""
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: refka\n"
        f"resources: [{os.path.relpath(BASE, tmp_path)}]\ncomponents: [{os.path.relpath(SERVICEMONITOR, tmp_path)}]\n")
    return tmp_path


RENDERED = {"base": BASE, **{f"overlay {k}": v for k, v in OVERLAYS.items()}, "smoke job": SMOKE}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", [*RENDERED, "base + servicemonitor"])
def test_every_kustomization_builds_and_validates_against_the_kubernetes_schemas(name, version, tmp_path):
    docs = render(with_servicemonitor(tmp_path) if name == "base + servicemonitor" else RENDERED[name])
    assert docs
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM:
            continue
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_strict_validation_refuses_a_misspelt_field():
    sts = find(render(OVERLAYS["kind"]), "StatefulSet", "refka")
    bad = copy.deepcopy(sts)
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSIONS[0], strict=True)


def test_the_servicemonitor_scrapes_the_admin_port_of_the_brokers_service(tmp_path):
    docs = render(with_servicemonitor(tmp_path))
    (sm,) = of_kind(docs, "ServiceMonitor")
    selected = [s for s in of_kind(docs, "Service")
                if sm["spec"]["selector"]["matchLabels"].items() <= s["metadata"].get("labels", {}).items()]
    assert [s["metadata"]["name"] for s in selected] == ["refka-headless"]
    ports = {p["name"]: p for p in selected[0]["spec"]["ports"]}
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] in ports
    refka = container(find(docs, "StatefulSet", "refka"), "refka")
    assert named_port(refka, ports[endpoint["port"]]["targetPort"]) == int(refka_env(refka, 0)["ADMIN_PORT"])


# -- the brokers -------------------------------------------------------------------------


def refka_env(c: dict[str, Any], ordinal: int, host_ip: str = "192.0.2.10") -> dict[str, str]:
    return pod_env(c, {"metadata.name": f"refka-{ordinal}", "metadata.namespace": NAMESPACE,
                       "status.hostIP": host_ip})


def started(workload: dict[str, Any], ordinal: int, tmp_path: Path, rack: str = "zone-x") -> dict[str, Any]:
    """What refka-start.sh hands `refka serve` in pod ``ordinal``: its arguments and the
    broker config `refka serve` reads from its environment (the script run for real, with
    a stand-in `refka` on PATH that prints both)."""
    c = container(workload, "refka")
    env = refka_env(c, ordinal)
    rack_file = tmp_path / f"rack-{ordinal}"
    rack_file.write_text(rack)
    env["RACK_FILE"] = str(rack_file)
    stand_in = tmp_path / "bin"
    stand_in.mkdir(exist_ok=True)
    (stand_in / "refka").write_text('#!/bin/sh\nexec python3 -c \'import json, os, sys; '
                                    'print(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ)}))\' "$@"\n')
    (stand_in / "refka").chmod(0o755)
    env["PATH"] = f"{stand_in}:{os.environ['PATH']}"
    command = [part.replace("/opt/refka-k8s", str(BASE)) for part in c["command"]]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    out["config"] = BrokerConfig.load(environ=out["env"])
    return out


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_each_pod_ordinal_is_its_own_broker_id(overlay, tmp_path):
    sts = find(render(OVERLAYS[overlay]), "StatefulSet", "refka")
    ids = [started(sts, i, tmp_path)["config"].broker_id for i in range(sts["spec"]["replicas"])]
    assert ids == list(range(sts["spec"]["replicas"]))


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_advertised_names_resolve_through_the_headless_service(overlay, tmp_path):
    docs = render(OVERLAYS[overlay])
    sts = find(docs, "StatefulSet", "refka")
    service = find(docs, "Service", sts["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    # A broker is ready only once the controller reached it at that name: publish it before.
    assert service["spec"]["publishNotReadyAddresses"] is True
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    namespace = sts["metadata"]["namespace"]
    c = container(sts, "refka")
    for i in range(sts["spec"]["replicas"]):
        config = started(sts, i, tmp_path)["config"]
        inter = config.inter_broker_listener
        (internal,) = [ep for ep in config.advertised_listeners if ep.listener == inter]
        assert internal.host == f"refka-{i}.{service['metadata']['name']}.{namespace}.svc.cluster.local"
        (bound,) = [ep for ep in config.listeners if ep.listener == inter]
        assert internal.port == bound.port
        assert bound.port in {named_port(c, p["targetPort"]) for p in service["spec"]["ports"]}
        assert {ep.listener for ep in config.advertised_listeners} == {ep.listener for ep in config.listeners}


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_each_broker_has_a_nodeport_that_its_external_listener_advertises(overlay, tmp_path):
    docs = render(OVERLAYS[overlay])
    sts = find(docs, "StatefulSet", "refka")
    c = container(sts, "refka")
    template_labels = sts["spec"]["template"]["metadata"]["labels"]
    for i in range(sts["spec"]["replicas"]):
        config = started(sts, i, tmp_path)["config"]
        (external,) = [ep for ep in config.advertised_listeners if ep.listener == "EXTERNAL"]
        (bound,) = [ep for ep in config.listeners if ep.listener == "EXTERNAL"]
        (svc,) = [s for s in of_kind(docs, "Service")
                  if s["spec"].get("selector", {}).get("statefulset.kubernetes.io/pod-name") == f"refka-{i}"]
        assert svc["spec"]["type"] == "NodePort"
        assert {k: v for k, v in svc["spec"]["selector"].items() if k != "statefulset.kubernetes.io/pod-name"
                }.items() <= template_labels.items()
        (port,) = svc["spec"]["ports"]
        assert port["nodePort"] == external.port
        assert named_port(c, port["targetPort"]) == bound.port
        assert external.host == ("127.0.0.1" if overlay == "kind" else "192.0.2.10")  # kind: the host's port mappings


def test_kind_maps_every_external_nodeport_to_the_hosts_loopback():
    docs = render(OVERLAYS["kind"])
    node_ports = sorted(p["nodePort"] for s in of_kind(docs, "Service") if s["spec"].get("type") == "NodePort"
                        for p in s["spec"]["ports"])
    (cluster,) = load(KIND_CLUSTER)
    mapped = sorted(m["containerPort"] for n in cluster["nodes"] for m in n.get("extraPortMappings", [])
                    if m["hostPort"] == m["containerPort"] and m.get("listenAddress") == "127.0.0.1")
    assert mapped == node_ports == [30092, 30093, 30094]


def test_the_rack_is_the_zone_label_the_init_container_reads(tmp_path):
    docs = render(OVERLAYS["kind"])
    sts = find(docs, "StatefulSet", "refka")
    spec = sts["spec"]["template"]["spec"]
    init = container(sts, "node-zone", init=True)
    main = container(sts, "refka")
    rack_file = refka_env(main, 0)["RACK_FILE"]
    # The file the init container writes is the file the broker reads, on a volume both mount.
    assert init["command"][-1] == rack_file
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert {m["name"]: m["mountPath"] for m in main["volumeMounts"]}["pod-info"] == mounts["pod-info"]
    assert rack_file.startswith(mounts["pod-info"] + "/")
    assert {v["name"] for v in spec["volumes"]} >= {"pod-info", "refka-k8s", "kube-api-access"}
    assert "kube-api-access" not in {m["name"] for m in main["volumeMounts"]}  # the token: init only
    assert pod_env(init, {"spec.nodeName": "node-1"})["NODE_NAME"] == "node-1"
    # It may read nodes, as the pod's service account, in the pod's namespace.
    role = find(docs, "ClusterRole", "refka-node-reader")
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]} in role["rules"]
    binding = find(docs, "ClusterRoleBinding", "refka-node-reader")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert {"kind": "ServiceAccount", "name": spec["serviceAccountName"],
            "namespace": sts["metadata"]["namespace"]} in binding["subjects"]
    # The rack read is what the broker registers.
    assert started(sts, 1, tmp_path, rack="zone-b")["config"].rack == "zone-b"
    # The label it reads is the one kind's nodes carry (three zones) and multi-zone spreads over.
    script = (BASE / "node-zone.py").read_text()
    assert '"topology.kubernetes.io/zone"' in script
    (cluster,) = load(KIND_CLUSTER)
    zones = [n["labels"]["topology.kubernetes.io/zone"] for n in cluster["nodes"] if n["role"] == "worker"]
    assert len(set(zones)) == len(zones) == sts["spec"]["replicas"]
    for name in ("refka", "zookeeper"):
        (spread,) = find(render(OVERLAYS["multi-zone"]), "StatefulSet", name)["spec"]["template"]["spec"][
            "topologySpreadConstraints"]
        assert spread["topologyKey"] == "topology.kubernetes.io/zone"
        assert spread["whenUnsatisfiable"] == "DoNotSchedule" and spread["minDomains"] == 3


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_zookeeper_connect_string_names_every_server_of_the_ensemble(overlay, tmp_path):
    docs = render(OVERLAYS[overlay])
    zk = find(docs, "StatefulSet", "zookeeper")
    zk_service = find(docs, "Service", zk["spec"]["serviceName"])
    assert zk_service["spec"]["clusterIP"] == "None" and zk_service["spec"]["publishNotReadyAddresses"] is True
    # With OrderedReady the second server would wait for the first to be ready: never, alone.
    assert zk["spec"]["podManagementPolicy"] == "Parallel"
    zk_container = container(zk, "zookeeper")
    zk_env = pod_env(zk_container, {})
    client_port = int(re.search(r"clientPort=(\d+)", zk_env["ZOO_CFG_EXTRA"]).group(1))
    assert client_port == named_port(zk_container, "client")
    namespace = zk["metadata"]["namespace"]
    config = started(find(docs, "StatefulSet", "refka"), 0, tmp_path)["config"]
    hosts, _, chroot = config["zookeeper.connect"].partition("/")
    assert chroot == "refka"
    assert hosts.split(",") == [f"zookeeper-{i}.{zk_service['metadata']['name']}.{namespace}.svc.cluster.local:"
                                f"{client_port}" for i in range(zk["spec"]["replicas"])]
    # And the servers find each other on the ports they listen on, myid = ordinal + 1.
    servers = zk_env["ZOO_SERVERS"].split()
    assert servers == [f"server.{i + 1}=zookeeper-{i}.{zk_service['metadata']['name']}:"
                       f"{named_port(zk_container, 'server')}:{named_port(zk_container, 'election')}"
                       for i in range(zk["spec"]["replicas"])]
    for i in range(zk["spec"]["replicas"]):
        line = zk_container["args"][0].replace("exec /docker-entrypoint.sh zkServer.sh start-foreground",
                                               'echo "$ZOO_MY_ID"')
        done = subprocess.run(zk_container["command"] + [line], env={"HOSTNAME": f"zookeeper-{i}", "PATH": "/bin"},
                              capture_output=True, text=True, timeout=10)
        assert done.stdout.strip() == str(i + 1), done.stderr


def test_every_refka_variable_names_a_property_refka_reads():
    """env_properties ignores a REFKA_ name it does not know: a typo would be silent."""
    known = {"REFKA_" + name.upper().replace(".", "_") for name in DEFAULTS} | CLI_VARIABLES
    docs = render(OVERLAYS["kind"]) + render(OVERLAYS["multi-zone"])
    names = {e["name"] for d in of_kind(docs, "StatefulSet") for c in d["spec"]["template"]["spec"]["containers"]
             for e in c.get("env", []) if e["name"].startswith("REFKA_")}
    _, stages = dockerfile_stages()
    names |= {k for k in image_env(stages[-1]) if k.startswith("REFKA_")}
    assert names and names <= known, names - known


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_probes_ask_ports_that_are_served(overlay, tmp_path):
    docs = render(OVERLAYS[overlay])
    sts = find(docs, "StatefulSet", "refka")
    c = container(sts, "refka")
    env = refka_env(c, 0)
    run = started(sts, 0, tmp_path)
    # The admin API (and /metrics) listens on ADMIN_PORT on every address: refka-start.sh says so.
    admin_port = int(env["ADMIN_PORT"])
    assert run["argv"][:5] == ["serve", "--admin-host", "0.0.0.0", "--admin-port", str(admin_port)]
    for kind in ("startupProbe", "livenessProbe"):
        probe = c[kind]["httpGet"]
        assert named_port(c, probe["port"]) == admin_port and probe["path"] == "/api/openapi.json"
    # Readiness: `refka health --ready` on the INTERNAL listener's port.
    command = c["readinessProbe"]["exec"]["command"]
    assert command[:3] == ["refka", "health", "--ready"]
    bootstrap = command[command.index("--bootstrap") + 1]
    internal = [ep for ep in parse_listeners(env["REFKA_LISTENERS"]) if ep.listener == "INTERNAL"][0]
    assert bootstrap == f"127.0.0.1:{internal.port}" and internal.host == "0.0.0.0"
    assert c["readinessProbe"]["timeoutSeconds"] > float(command[command.index("--timeout") + 1])
    # Prometheus' scrape annotations name the same port.
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(admin_port) and annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/scrape"] == "true"
    # ZooKeeper: alive while its client port accepts, ready as a member of a quorum.
    zk = container(find(docs, "StatefulSet", "zookeeper"), "zookeeper")
    assert named_port(zk, zk["livenessProbe"]["tcpSocket"]["port"]) == 2181
    assert "zkServer.sh status" in " ".join(zk["readinessProbe"]["exec"]["command"])
    assert "srvr" in pod_env(zk, {})["ZOO_4LW_COMMANDS_WHITELIST"].split(",")


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_each_broker_keeps_its_log_dirs_on_a_volume_of_its_own(overlay):
    docs = render(OVERLAYS[overlay])
    for name, path_of in (("refka", lambda env: env["REFKA_LOG_DIRS"]), ("zookeeper", lambda env: env["ZOO_DATA_DIR"])):
        sts = find(docs, "StatefulSet", name)
        c = container(sts, name)
        env = refka_env(c, 0) if name == "refka" else pod_env(c, {})
        (claim,) = sts["spec"]["volumeClaimTemplates"]
        assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert mounts[claim["metadata"]["name"]] == path_of(env)
        assert claim["metadata"]["name"] not in {v["name"] for v in sts["spec"]["template"]["spec"].get("volumes", [])}


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_one_pod_per_node_requests_resources_and_a_budget_keeps_a_quorum(overlay):
    docs = render(OVERLAYS[overlay])
    for name in ("refka", "zookeeper"):
        sts = find(docs, "StatefulSet", name)
        spec = sts["spec"]["template"]["spec"]
        (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
        for c in spec["containers"] + spec.get("initContainers", []):
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"], c["name"]
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
        (pdb,) = [p for p in of_kind(docs, "PodDisruptionBudget")
                  if p["spec"]["selector"]["matchLabels"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()]
        assert pdb["spec"]["maxUnavailable"] == 1 and sts["spec"]["replicas"] == 3


def test_the_pods_run_as_the_images_user_and_have_time_for_a_controlled_shutdown():
    docs = render(OVERLAYS["kind"])
    sts = find(docs, "StatefulSet", "refka")
    spec = sts["spec"]["template"]["spec"]
    _, stages = dockerfile_stages()
    user, _, group = last(stages[-1], "USER").args.partition(":")
    assert spec["securityContext"]["runAsUser"] == int(user) and spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["fsGroup"] == int(group)  # the volume writable by the broker
    for c in [*spec["containers"], *spec["initContainers"]]:
        assert c["image"] == "refka:dev" and c["imagePullPolicy"] == "IfNotPresent"  # kind load, never pulled
    # SIGTERM: up to max.retries ControlledShutdown attempts of up to 30 s, backoff apart.
    config = BrokerConfig.load(environ=refka_env(container(sts, "refka"), 0))
    retries = config["controlled.shutdown.max.retries"]
    worst = retries * 30 + (retries - 1) * config["controlled.shutdown.retry.backoff.ms"] / 1000
    assert spec["terminationGracePeriodSeconds"] >= worst + 10
    # The image's defaults allow the same.
    image = BrokerConfig.load(environ=image_env(stages[-1]))
    assert image["controlled.shutdown.max.retries"] == retries
    assert image["controlled.shutdown.retry.backoff.ms"] == config["controlled.shutdown.retry.backoff.ms"]


def test_the_smoke_job_produces_and_consumes_through_the_internal_listener():
    docs = render(SMOKE)
    job = find(docs, "Job", "refka-smoke")
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["python3", "/opt/refka-smoke/smoke.py"]
    bootstrap = c["args"][c["args"].index("--bootstrap") + 1]
    kind = render(OVERLAYS["kind"])
    sts = find(kind, "StatefulSet", "refka")
    host, _, port = bootstrap.rpartition(":")
    assert host == sts["spec"]["serviceName"] and job["metadata"]["namespace"] == sts["metadata"]["namespace"]
    internal = [ep for ep in parse_listeners(refka_env(container(sts, "refka"), 0)["REFKA_LISTENERS"])
                if ep.listener == "INTERNAL"][0]
    assert int(port) == internal.port
    assert c["image"] == "refka:dev"
