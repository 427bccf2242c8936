"""``python -m tests.integration.crashing_broker serve ...``: ``refka serve`` whose
controller kills its own process (SIGKILL, as ``kill -9``) right after a named step of a
KIP-253 operation (refka/controller/faults.py lists them).

``REFKA_TEST_CRASH_AT``: the steps, comma separated; ``REFKA_TEST_CRASH_MARKERS``: a
directory shared by the cluster's processes. Each step kills once in the whole
cluster: the first controller to reach it creates ``<markers>/<step>`` (exclusively)
and dies; the next controller, finishing the operation, passes the step, and so does a
restarted process.

Read here, by the test's wrapper, and nowhere in refka: production code only has the
hook, unset (faults.py).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from refka import cli
from refka.controller import faults

STEPS = {s for s in os.environ.get("REFKA_TEST_CRASH_AT", "").split(",") if s}
MARKERS = Path(os.environ.get("REFKA_TEST_CRASH_MARKERS", "."))


async def crash_at(step: str) -> None:
    if step not in STEPS:
        return
    try:
        fd = os.open(MARKERS / step, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # another controller died here already
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    print(f"crashing_broker: SIGKILL after {step}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    faults.step_hook = crash_at
    sys.exit(cli.main(sys.argv[1:]))
