"""A server process for the comparison benches (bench/compare_llama_load.py,
tools/bench/spec_llama.py): `statebank serve` or llama-server on a free
loopback port, ready once GET /health answers 200, stopped with SIGTERM
(SIGKILL when it has not exited 60 s later), its output dropped.
"""
from __future__ import annotations

import contextlib
import http.client
import signal
import socket
import subprocess
import sys
import time


class NotServing(RuntimeError):
    """The server exited, or did not answer /health in time."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, proc: subprocess.Popen, what: str, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise NotServing(f"{what} exited ({proc.returncode}) before it served")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise NotServing(f"{what} did not answer /health within {timeout_s:.0f} s")


def stop(proc: subprocess.Popen):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def serving(cmd: list[str], port: int, what: str, timeout_s: float = 600):
    """Runs `cmd`, a server listening on `port`, for the block once it serves
    (the command line goes to stderr first); raises NotServing when it does not.
    """
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc, what, timeout_s)
        yield proc
    finally:
        stop(proc)
