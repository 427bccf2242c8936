"""``python -m lab.bench.connections``: what idle connections cost a broker.

Starts ``refka serve --memory``, reads its RSS, opens ``--connections``
connections that each get one ApiVersions answered and then stay idle, reads
the RSS again, closes them and reads it a third time. Prints the broker's RSS
at each step and the cost per idle connection (figures, not pass/fail).
"""

from __future__ import annotations

import argparse
import resource
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from refka.protocol import RequestHeader, encode_request_header, join
from refka.protocol.messages.api_versions import ApiVersions


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def api_versions_frame() -> bytes:
    body = encode_request_header(RequestHeader(ApiVersions.key, 0, 1, "bench"), 1) + join(
        ApiVersions.encode_request(ApiVersions.Request(), 0))
    return struct.pack(">i", len(body)) + body


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.bench.connections", description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", type=int, default=2000)
    p.add_argument("--port", type=int, default=39500)
    args = p.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.connections + 1000)), hard))
    proc = subprocess.Popen([sys.executable, "-m", "refka.cli", "serve", "--memory", "--port", str(args.port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        if not proc.stdout.readline().startswith("refka ready"):
            raise SystemExit("the broker did not start")
        time.sleep(0.5)
        before = rss_kib(proc.pid)
        frame = api_versions_frame()
        socks = []
        for _ in range(args.connections):
            s = socket.create_connection(("127.0.0.1", args.port), timeout=30)
            s.sendall(frame)
            (n,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
            s.recv(n, socket.MSG_WAITALL)
            socks.append(s)
        time.sleep(0.5)
        idle = rss_kib(proc.pid)
        for s in socks:
            s.close()
        time.sleep(1.0)
        after = rss_kib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"broker RSS: {before / 1024:.1f} MiB at rest, {idle / 1024:.1f} MiB with {args.connections} idle "
          f"connections, {after / 1024:.1f} MiB after they closed")
    print(f"per idle connection: {(idle - before) / args.connections:.1f} KiB; "
          f"kept after close: {(after - before) / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
