"""The client of tests/cli_template.py: one warm template per test process and per set of
`PYTHON*` settings, started on first use and ended with the process."""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
# The one place that names the CLI module; run as `python -m CLI_MODULE ...` from ROOT so
# the worktree's code is what runs (the `citeledger` console script may point elsewhere).
CLI_MODULE = "cli.main"


class Template:
    def __init__(self, python_settings: dict[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="citeledger-cli-")  # 0700
        self.path = os.path.join(self.folder, "socket")
        # What an interpreter reads at start comes from the runs it serves; nothing else of
        # this process's settings (each run brings its whole environment).
        own = ("PYTHON", "CITELEDGER_")
        env = {key: value for key, value in os.environ.items() if not key.startswith(own)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.cli_template", self.path],
            cwd=ROOT,
            env={**env, **python_settings},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not os.path.exists(self.path):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the CLI template did not start (exit {self.process.poll()})")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", CLI_MODULE, *args]
        request = json.dumps({"args": args, "env": env, "cwd": str(ROOT)}).encode()
        with (
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn,
        ):
            conn.connect(self.path)
            socket.send_fds(conn, [request], [out.fileno(), err.fileno()])
            pid = int(conn.recv(64))
            conn.settimeout(timeout)
            try:
                answer = conn.recv(64)
            except TimeoutError:
                os.kill(pid, 9)  # as subprocess.run does on a timeout
                conn.settimeout(None)
                conn.recv(64)
                raise subprocess.TimeoutExpired(argv, timeout, _text(out), _text(err)) from None
            if not answer:
                raise RuntimeError("the CLI template ended during a run")
            code, cpu = answer.split()
            global cpu_seconds
            cpu_seconds += float(cpu)
            return subprocess.CompletedProcess(argv, int(code), _text(out), _text(err))

    def spawn(self, args: list[str], env: dict[str, str], output: int, *, new_session: bool) -> ForkedProcess:
        """Start `cli.main ARGS` and return at once, its stdout and stderr on `output`."""
        request = json.dumps({"args": args, "env": env, "cwd": str(ROOT), "new_session": new_session})
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(self.path)
        with open(os.devnull, "rb") as stdin:
            socket.send_fds(conn, [request.encode()], [stdin.fileno(), output, output])
        return ForkedProcess(conn, int(conn.recv(64)), [sys.executable, "-m", CLI_MODULE, *args])


class ForkedProcess:
    """What the suite uses of a `subprocess.Popen` (pid, poll, wait, returncode, kill,
    terminate, send_signal), for a run forked by the template: the template tells its end."""

    def __init__(self, conn: socket.socket, pid: int, args: list[str]) -> None:
        self.conn, self.pid, self.args = conn, pid, args
        self.returncode: int | None = None

    def _answer(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            self.conn.settimeout(timeout)
            try:
                answer = self.conn.recv(64)
            except (BlockingIOError, TimeoutError):
                return None
            self.returncode = int(answer.split()[0]) if answer else -9
            self.conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._answer(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._answer(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(9)

    def terminate(self) -> None:
        self.send_signal(15)


def _text(file: IO[bytes]) -> str:
    """The output as `subprocess.run(text=True)` gives it: locale encoding, universal newlines."""
    file.seek(0)
    return file.read().decode().replace("\r\n", "\n").replace("\r", "\n")


# The forked runs' CPU, which this process's RUSAGE_CHILDREN does not see (they are the
# template's children): for measuring the suite.
cpu_seconds = 0.0
_templates: dict[tuple[tuple[str, str], ...], Template] = {}
_lock = threading.Lock()


def enabled() -> bool:
    """CITELEDGER_TEST_FORK_CLI=0: every CLI run in a fresh interpreter."""
    return os.environ.get("CITELEDGER_TEST_FORK_CLI") != "0"


def template_for(env: dict[str, str]) -> Template:
    settings = {key: value for key, value in env.items() if key.startswith("PYTHON")}
    key = tuple(sorted(settings.items()))
    with _lock:
        template = _templates.get(key)
        if template is None or not template.alive():
            if template is not None:
                template.close()
            template = _templates[key] = Template(settings)
    return template


def run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return template_for(env).run(args, env, timeout)


def spawn(args: list[str], env: dict[str, str], output: int, *, new_session: bool = False) -> ForkedProcess:
    return template_for(env).spawn(args, env, output, new_session=new_session)


def launch_args(args: list[str], env: dict[str, str]) -> list[str]:
    """The interpreter arguments that run `cli.main ARGS` for a client that starts the process
    itself (the MCP SDK's stdio client): through tests/cli_launch.py, or plainly."""
    if not enabled():
        return ["-m", CLI_MODULE, *args]
    return ["-m", "tests.cli_launch", template_for(env).path, *args]


@atexit.register
def _close_all() -> None:
    for template in _templates.values():
        template.close()
