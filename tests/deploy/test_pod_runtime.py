"""What the image and the pod run, run here: each in a network namespace of its own with
only its loopback (its ports clash with nobody's, it reaches nothing), with the installed
``refka``, as the image's non-root user where that user can run this machine's Python
(not here, where the venv's interpreter lives under root's 0700 home: as root then).

- The image: ENTRYPOINT + CMD with the image's ENV; its HEALTHCHECK passes once the
  broker is ready; its STOPSIGNAL stops it cleanly (a controlled shutdown, exit 0).
- The StatefulSet's broker container: its command (refka-start.sh, from the ConfigMap's
  source) with the environment the kubelet would give pod refka-2 (the init container's
  rack file written as it would be, its advertised name resolving as the headless
  Service's does); its startup, liveness and readiness probes pass; the broker it
  registers is broker 2, in the rack, at the advertised names; SIGTERM within the grace
  period ends it with exit 0. The embedded store stands in for ZooKeeper here (the
  ZooKeeper wiring runs in tests/integration/test_netns_cluster.py).

Skipped, saying why, where network namespaces cannot be made (not root).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.manifests import BASE, container, dockerfile_stages, find, image_env, last, load, pod_env
from tests.integration.netns import Namespace, netns_unavailable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

VENV_BIN = str(Path(sys.executable).parent)


def image_uid() -> int:
    _, stages = dockerfile_stages()
    return int(last(stages[-1], "USER").args.partition(":")[0])


def runnable_as(uid: int) -> bool:
    """Whether ``uid`` can run this venv's Python (not where it lives under a 0700 /root)."""
    done = subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", "--",
                           "/bin/sh", "-c", f'exec "{sys.executable}" -c pass'], capture_output=True, timeout=30)
    return done.returncode == 0


@pytest.fixture
def user_dir() -> Iterator[tuple[int | None, Path]]:
    """The uid to run as (the image's, where it can run this machine's Python; else root's,
    the image's user being checked by test_dockerfile.py and test_manifests.py) and a
    directory it owns (pytest's own are root's, mode 0700)."""
    uid = image_uid()
    user = uid if runnable_as(uid) else None
    d = Path(tempfile.mkdtemp(prefix="refka-pod-"))
    if user is not None:
        os.chown(d, user, user)
    yield user, d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def namespace_for() -> Iterator[type[Namespace]]:
    reason = netns_unavailable(iptables=False)
    if reason:
        pytest.skip(reason)
    made: list[Namespace] = []

    class Made(Namespace):
        def __init__(self, names: list[str]) -> None:
            super().__init__(names)
            made.append(self)

    yield Made
    for ns in made:
        ns.close()


def wait_for(check, timeout: float, what: str, log: Path):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; log:\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.3)


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFKA_")}
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    return env


def stop_with(proc, sig: int, within: float) -> float:
    t0 = time.monotonic()
    proc.send_signal(sig)
    assert proc.wait(within) == 0
    return time.monotonic() - t0


def test_the_images_entrypoint_serves_passes_its_health_check_and_stops_on_its_stop_signal(namespace_for, user_dir):
    uid, data = user_dir
    _, stages = dockerfile_stages()
    runtime = stages[-1]
    env = {**base_env(), **image_env(runtime), "REFKA_LOG_DIRS": str(data / "data"), "HOME": str(data)}
    argv = last(runtime, "ENTRYPOINT").exec_form() + last(runtime, "CMD").exec_form()
    ns = namespace_for([])
    log = data / "container.log"
    proc = ns.popen(argv, env=env, log=log, user=uid, cwd=data)
    health = last(runtime, "HEALTHCHECK").exec_form()
    done = wait_for(lambda: (r := ns.run(health, env=env, user=uid, cwd=data)).returncode == 0 and r, 60,
                    "the HEALTHCHECK command to pass", log)
    assert "ready (controller 0, 1 brokers)" in done.stdout
    cmd = last(runtime, "CMD").exec_form()
    status, body = ns.http_get(f"http://127.0.0.1:{cmd[cmd.index('--admin-port') + 1]}/metrics")
    assert status == 200 and "kafka_server_replicamanager_leadercount" in body
    # docker stop: the STOPSIGNAL, and the broker's clean shutdown.
    assert last(runtime, "STOPSIGNAL").args == "SIGTERM"
    stop_with(proc, signal.SIGTERM, 60)
    assert "shutting_down" in log.read_text()
    assert any((data / "data").iterdir()), "nothing written under REFKA_LOG_DIRS by the image's user"


def test_the_statefulsets_broker_container_starts_as_pod_two_of_its_rack_and_stops_on_sigterm(namespace_for,
                                                                                               user_dir):
    uid, data = user_dir
    docs = load(BASE / "refka.yaml")
    sts = find(docs, "StatefulSet", "refka")
    spec = sts["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsUser"] == image_uid()
    c = container(sts, "refka")
    env = pod_env(c, {"metadata.name": "refka-2", "metadata.namespace": "refka", "status.hostIP": "198.51.100.7"})
    # The rack file, as the node-zone init container leaves it on the pod-info volume.
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    rack_file = data / Path(env["RACK_FILE"]).relative_to(mounts["pod-info"])
    rack_file.write_text("zone-b")
    env.update(base_env())
    env.update({"RACK_FILE": str(rack_file), "REFKA_LOG_DIRS": str(data / "data"), "HOME": str(data),
                "REFKA_ZOOKEEPER_CONNECT": ""})  # alone: the embedded store
    internal_name = f"refka-2.{sts['spec']['serviceName']}.refka.svc.{env['CLUSTER_DOMAIN']}"
    ns = namespace_for([internal_name])
    command = [part.replace(mounts["refka-k8s"], str(BASE)) for part in c["command"]]
    log = data / "pod.log"
    proc = ns.popen(command, env=env, log=log, user=uid, cwd=data)

    def http_probe(probe: dict) -> bool:
        port = probe["httpGet"]["port"]
        number = next(p["containerPort"] for p in c["ports"] if p["name"] == port) if isinstance(port, str) else port
        return ns.http_get(f"http://127.0.0.1:{number}{probe['httpGet']['path']}")[0] == 200

    wait_for(lambda: http_probe(c["startupProbe"]), 60, "the startup probe", log)
    assert http_probe(c["livenessProbe"])
    ready = wait_for(lambda: (r := ns.run(c["readinessProbe"]["exec"]["command"], env=env, user=uid,
                                          cwd=data)).returncode == 0 and r, 30, "the readiness probe", log)
    assert "ready" in ready.stdout
    status, body = ns.http_get(f"http://127.0.0.1:{env['ADMIN_PORT']}/api/cluster")
    assert status == 200, body
    (broker,) = json.loads(body)["brokers"]
    assert broker["id"] == 2 and broker["rack"] == "zone-b"
    assert broker["endpoints"] == {"INTERNAL": f"{internal_name}:9092", "EXTERNAL": "198.51.100.7:30094"}
    took = stop_with(proc, signal.SIGTERM, spec["terminationGracePeriodSeconds"])
    assert took < spec["terminationGracePeriodSeconds"]
    text = log.read_text()
    assert "refka-start: broker.id=2 broker.rack=zone-b" in text and "shutting_down" in text
