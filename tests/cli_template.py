"""A warm interpreter that forks one real `python -m cli.main` process per CLI run of the suite.

Each CLI subprocess used to spend most of its CPU (0.6-1 s of ~1.2 s) importing the same
modules before doing its few milliseconds of work, for hundreds of runs. This process imports
every module of `cli`, `ledger`, `projections` and `bootstrap` once, then, for each request on
its Unix socket, forks: the child takes the request's argv, environment, working directory and
output files and runs `cli.main` as `__main__`, exactly as `python -m cli.main` would, through
to the interpreter's own exit (non-daemon threads joined, atexit handlers, flushed output). The
run is still a separate OS process with its own exit status; only the imports are shared.

What a fork cannot change is left to `tests/server_process.run_cli`, which falls back to a
fresh interpreter: a different `PYTHON*` setting (read at interpreter start) or a prefix
command (`setpriv`). No product module may read a setting at import (projections/runner.py
reads its health limits when asked), or a forked run would see the template's value.

Protocol (SOCK_SEQPACKET, one connection per run): the client sends a JSON request with two
file descriptors (stdout, stderr) or three (stdin, stdout, stderr: tests/cli_launch.py); the
template answers the child's pid, then its exit code (negative: the signal that ended it, as
`subprocess` reports it) and its CPU seconds.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import pkgutil
import runpy
import selectors
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRELOADED = ("cli", "ledger", "projections", "bootstrap")
# `citeledger mcp` (stdio, through tests/cli_launch.py): the MCP SDK alone is ~1.4 s of imports.
# `citeledger serve` (tests/server_process.ServerProcess): the app and uvicorn.
PRELOADED_MODULES = (
    *("api.mcp.server", "api.mcp.calls", "api.services", "api.auth", "api.metrics", "anyio"),
    *("api.app", "uvicorn", "uvicorn.main"),
)
MAX_REQUEST = 1 << 20


def preload() -> None:
    for name in PRELOADED:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            importlib.import_module(info.name)
    for name in PRELOADED_MODULES:
        importlib.import_module(name)


def serve(path: str) -> tuple[dict[str, Any], list[int]]:
    """Answer requests until the client goes away; returns only in a forked child."""
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".tmp")
    os.rename(path + ".tmp", path)  # the client waits for the name: bound and listening
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}
    while True:
        if os.getppid() != parent:  # the test worker is gone
            sys.exit(0)
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for sock in (listener, conn, *waiting.values()):
                        sock.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    return json.loads(message), fds
                for fd in fds:
                    os.close(fd)
                conn.send(str(pid).encode())
                waiting[pid] = conn
            else:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
        while waiting:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid)
            answer = f"{os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime:.6f}"
            try:
                conn.send(answer.encode())
            except OSError:
                pass  # the client gave up (a timeout): nothing to tell
            conn.close()


def run_child(request: dict[str, Any], fds: list[int]) -> None:
    """Become `python -m cli.main ARGS` with the request's environment and files: (stdout,
    stderr) with stdin from /dev/null as `subprocess.run` gives a test, or (stdin, stdout,
    stderr) from tests/cli_launch.py."""
    if request.get("new_session"):
        os.setsid()  # as Popen(start_new_session=True): the run leads its own process group
    sys.stdout.flush()
    sys.stderr.flush()
    if len(fds) == 2:
        fds = [os.open(os.devnull, os.O_RDONLY), *fds]
    for target, source in enumerate(fds):
        os.dup2(source, target)
        os.close(source)
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    os.chdir(request["cwd"])
    # As `python -m`: the module runs afresh as __main__ (runpy sets argv[0] to its file); the
    # preloaded copy is dropped so runpy does not warn that it is already imported.
    sys.modules.pop("cli.main", None)
    sys.argv = ["-m", *request["args"]]
    runpy.run_module("cli.main", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    preload()
    # What the imports made is shared with every child, copy-on-write: kept out of the
    # collector's sight so a child's collections do not touch (and so copy) all of it.
    gc.collect()
    gc.freeze()
    child_request, child_fds = serve(sys.argv[1])
    run_child(child_request, child_fds)
