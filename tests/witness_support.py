"""A real `citeledger witness serve` in its own process (own key, own SQLite), for
the witness tests and the benchmark."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests import forked_cli, loopback_http
from tests.server_process import CLI_MODULE, ROOT, free_port, run_cli


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), dict(os.environ))


class WitnessProcess:
    """`witness init` (once) + `add-log` + `serve` on a free port; stop() and start()
    again keep the directory, as a restarted witness does."""

    def __init__(self, directory: Path, name: str, log_vkey: str) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | forked_cli.ForkedProcess | None = None
        made = cli("witness", "init", "--dir", str(directory), "--name", name)
        assert made.returncode == 0, made.stderr
        self.vkey = made.stdout.strip()
        added = cli("witness", "add-log", "--dir", str(directory), log_vkey)
        assert added.returncode == 0, added.stderr

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def setting(self) -> str:
        """This witness as a CITELEDGER_WITNESSES entry."""
        return f"{self.url} {self.vkey}"

    def start(self) -> WitnessProcess:
        args = ["witness", "serve", "--dir", str(self.directory), "--port", str(self.port)]
        args += ["--log-level", "warning"]
        output = tempfile.TemporaryFile()
        if forked_cli.enabled():  # a real process all the same, forked from the warm interpreter
            self.process = forked_cli.spawn(args, dict(os.environ), output.fileno())
        else:
            self.process = subprocess.Popen(
                [sys.executable, "-m", CLI_MODULE, *args], cwd=ROOT, stdout=output, stderr=output
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output.seek(0)
                raise RuntimeError(output.read().decode(errors="replace") or "exited")
            try:
                if loopback_http.get(self.url + "/vkey", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("witness did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> WitnessProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
