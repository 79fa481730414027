"""`python -m tests.cli_launch SOCKET ARGS...`: `python -m cli.main ARGS` for a client that
starts the process itself (the MCP SDK's stdio client), forked from the warm template at
SOCKET (tests/cli_template.py) with this process's stdin, stdout, stderr, environment and
working directory. This process stands in for the child: it forwards the signals a parent
sends (SIGTERM, SIGINT, SIGHUP) and ends as the child ended, with its code or its signal."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def main() -> None:
    path, *args = sys.argv[1:]
    request = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(path)
    socket.send_fds(conn, [request], [0, 1, 2])
    pid = int(conn.recv(64))

    def forward(signum: int, _: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    answer = conn.recv(64)
    code = int(answer.split()[0]) if answer else 1
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)  # stdin, stdout, stderr belong to the child: nothing of ours to flush


if __name__ == "__main__":
    main()
