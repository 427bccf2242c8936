"""deploy/Dockerfile read as Docker reads it (no container engine here to build it): two
stages on python:3.11-slim, refka and its dependencies installed from the first stage's
wheels only, a numeric non-root user, `refka serve` as the entrypoint, `refka health` as
the health check, SIGTERM as the stop signal. What it runs is run in
test_pod_runtime.py."""

from __future__ import annotations

import fnmatch
import shlex
from pathlib import Path

from refka.cli import main as refka_main
from tests.deploy.manifests import DOCKERFILE, ROOT, dockerfile_stages, image_env, last


def test_two_stages_on_python_3_11_slim_and_the_runtime_installs_only_the_built_wheels():
    args, stages = dockerfile_stages()
    assert len(stages) == 2
    build, runtime = stages
    assert args["PYTHON_IMAGE"] == "python:3.11-slim"
    assert build[0].args == "${PYTHON_IMAGE} AS build" and runtime[0].args == "${PYTHON_IMAGE}"
    assert any(i.keyword == "RUN" and "pip wheel" in i.args and "--wheel-dir /wheels ." in i.args for i in build)
    (install,) = [i for i in runtime if i.keyword == "RUN" and "pip install" in i.args]
    assert install.options()["mount"] == "type=bind,from=build,source=/wheels,target=/wheels"
    assert "--no-index --find-links=/wheels refka" in install.args  # nothing from an index at this stage
    assert not [i for i in runtime if i.keyword in ("COPY", "ADD")]  # no source tree in the image


def test_the_runtime_runs_as_a_numeric_non_root_user_it_creates():
    _, stages = dockerfile_stages()
    runtime = stages[-1]
    user, _, group = last(runtime, "USER").args.partition(":")
    assert user.isdigit() and int(user) != 0 and group.isdigit()  # numeric: runAsNonRoot can check it
    (install,) = [i for i in runtime if i.keyword == "RUN" and "useradd" in i.args]
    uid_arg = last(runtime, "ARG").args
    assert uid_arg == f"REFKA_UID={user}"
    assert "--uid ${REFKA_UID}" in install.args and "--gid ${REFKA_UID}" in install.args
    # The USER comes after everything that needs root.
    assert runtime.index(last(runtime, "USER")) > runtime.index(install)
    env = image_env(runtime)
    assert f"chown -R refka:refka {Path(env['REFKA_LOG_DIRS']).parent}" in install.args


def test_the_entrypoint_is_refka_serve_and_its_command_parses(monkeypatch):
    _, stages = dockerfile_stages()
    runtime = stages[-1]
    entrypoint = last(runtime, "ENTRYPOINT").exec_form()
    cmd = last(runtime, "CMD").exec_form()
    assert entrypoint == ["refka", "serve"]
    admin_port = cmd[cmd.index("--admin-port") + 1]
    exposed = last(runtime, "EXPOSE").args.split()
    assert sorted(exposed) == sorted([admin_port, "9092"])
    assert cmd[cmd.index("--admin-host") + 1] == "0.0.0.0"
    # The broker's listener, from the image's environment, binds every address on 9092.
    env = image_env(runtime)
    assert env["REFKA_LISTENERS"] == "PLAINTEXT://0.0.0.0:9092"
    assert Path(env["REFKA_LOG_DIRS"]).as_posix() in last(runtime, "VOLUME").args
    # The command line parses (argparse exits 2 on an unknown flag) into what serve gets.
    served = []
    monkeypatch.setattr("refka.broker.server.serve", lambda args: served.append(args) or 0)
    assert refka_main([*entrypoint[1:], *cmd]) == 0
    (args,) = served
    assert (args.admin_host, args.admin_port) == ("0.0.0.0", int(admin_port))


def test_the_health_check_is_refka_health_and_the_stop_signal_sigterm():
    _, stages = dockerfile_stages()
    runtime = stages[-1]
    health = last(runtime, "HEALTHCHECK")
    options = health.options()
    assert set(options) >= {"interval", "timeout", "start-period", "retries"}
    command = health.exec_form()
    assert command[:3] == ["refka", "health", "--ready"]
    assert float(command[command.index("--timeout") + 1]) < float(options["timeout"].rstrip("s"))
    assert last(runtime, "STOPSIGNAL").args == "SIGTERM"


def test_the_build_context_keeps_what_the_build_stage_copies():
    ignore = [line.strip() for line in (DOCKERFILE.parent / "Dockerfile.dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]

    def kept(path: str) -> bool:
        keep = True
        for pattern in ignore:  # the last matching line wins, as Docker's
            negated = pattern.startswith("!")
            p = pattern[1:] if negated else pattern
            if fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.rstrip("/") + "/*") or path == p.rstrip("/"):
                keep = negated
        return keep

    _, stages = dockerfile_stages()
    copied = [shlex.split(i.args)[:-1] for i in stages[0] if i.keyword == "COPY"]
    for sources in copied:
        for src in sources:
            assert (ROOT / src).exists(), src
            assert kept(src.rstrip("/")), f"{src} is ignored by Dockerfile.dockerignore"
    assert kept("refka/broker/dashboard.html") and kept("refka/protocol/_record_walk.c")
    assert not kept("tests/conftest.py") and not kept(".venv/bin/python") and not kept("lab/bench/__main__.py")
