"""A real `citeledger serve` in a subprocess, for the process tests: a free
loopback port, the environment for a SQLite data dir or a PostgreSQL schema,
waiting for /v1/healthz, a graceful stop and a SIGKILL of the whole process
group (`serve --workers N` forks uvicorn workers into the same group)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from ledger.config import LedgerConfig
from tests import forked_cli, loopback_http
from tests.forked_cli import CLI_MODULE as CLI_MODULE  # re-exported: the tests name them here
from tests.forked_cli import ROOT as ROOT

# Root ignores file modes; a process without CAP_DAC_OVERRIDE does not (it keeps uid 0, so the
# interpreter under /root stays readable). Files a test makes read-only then refuse its writes.
UNPRIVILEGED: tuple[str, ...] = (
    ("setpriv", "--bounding-set", "-dac_override,-dac_read_search") if os.geteuid() == 0 else ()
)


# Ports below the kernel's ephemeral range (32768 and up here), a block of its own per
# pytest-xdist worker: a port one worker probed free cannot be handed by the kernel to another
# worker's bind(0) or outgoing connection before the server it was meant for binds it.
_PORT_BASE, _PORT_BLOCK = 20_000, 1_500


def free_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = _PORT_BASE + (int(worker) if worker.isdigit() else 0) % 8 * _PORT_BLOCK
    for port in random.sample(range(first, first + _PORT_BLOCK), 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or lingering): another
            return port
    raise RuntimeError(f"no free port in {first}-{first + _PORT_BLOCK - 1}")


def server_env(config: LedgerConfig, bootstrap_token: str, **extra: str) -> dict[str, str]:
    """The environment for `serve`/`verify` on `config`'s store (SQLite dir or PostgreSQL
    schema): a known bootstrap token and a rate limit no test reaches."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CITELEDGER_BOOTSTRAP_TOKEN": bootstrap_token,
        "CITELEDGER_RATE_LIMIT_RPS": "100000",
        "CITELEDGER_RATE_LIMIT_BURST": "100000",
        **extra,
    }
    env.pop("CITELEDGER_DATABASE_URL", None)
    if config.database_url:
        env["CITELEDGER_DATABASE_URL"] = config.database_url
    return env


def without_citeledger_settings() -> dict[str, str]:
    """This process's environment minus every CITELEDGER_ setting, so a child sees only what
    its command line says."""
    return {key: value for key, value in os.environ.items() if not key.startswith("CITELEDGER_")}


def chromium() -> str:
    """The system Chromium for the browser tests (a missing one fails them, never skips)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("Chromium is required for the browser tests: apt-get install chromium")


def run_python(
    args: Sequence[str], env: dict[str, str], timeout: float = 120, prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` from ROOT with `env`, its output captured as text; never raises on exit code."""
    argv = [*prefix, sys.executable, *args]
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_cli(
    args: list[str], env: dict[str, str], timeout: float = 120, prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """`python -m cli.main ARGS`: forked from a warm interpreter (tests/cli_template.py) unless a
    prefix command or a different `PYTHON*` setting needs a fresh one
    (CITELEDGER_TEST_FORK_CLI=0: always a fresh one)."""
    if prefix or not forked_cli.enabled():
        return run_python(["-m", CLI_MODULE, *args], env, timeout, prefix)
    return forked_cli.run(args, env, timeout)


def _group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process of group `pgid` is left."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class ServerProcess:
    """`citeledger serve` on 127.0.0.1 in its own session (process group)."""

    def __init__(
        self,
        data_dir: Path,
        env: dict[str, str],
        *,
        workers: int = 1,
        log_path: Path | None = None,
        log_level: str = "warning",
        prefix: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.env = env
        self.workers = workers
        self.log_path = log_path
        self.log_level = log_level
        self.prefix = list(prefix)  # e.g. UNPRIVILEGED: runs the server through it
        self.port = 0
        self.process: subprocess.Popen[bytes] | forked_cli.ForkedProcess | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60, *, port: int | None = None) -> ServerProcess:
        """Start on `port` (a restart at the same address) or a fresh free port, and wait
        until /v1/healthz answers 200."""
        assert self.process is None or self.process.poll() is not None, "server already running"
        self.port = port or free_port()
        log: Any = open(self.log_path, "ab") if self.log_path else open(os.devnull, "wb")
        args = ["serve", "--data-dir", str(self.data_dir), "--port", str(self.port)]
        args += ["--workers", str(self.workers), "--log-level", self.log_level]
        try:
            if self.prefix or not forked_cli.enabled():
                self.process = subprocess.Popen(
                    [*self.prefix, sys.executable, "-m", CLI_MODULE, *args],
                    cwd=ROOT,
                    env=self.env,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            else:  # a real process of its own all the same, forked from the warm interpreter
                self.process = forked_cli.spawn(args, self.env, log.fileno(), new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if loopback_http.get(f"{self.base_url}/v1/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"server did not answer /v1/healthz in {timeout:.0f} s: {self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path and self.log_path.exists():
            return self.log_path.read_text(errors="replace")[-chars:]
        return "(no log captured)"

    def kill(self, timeout: float = 30) -> None:
        """SIGKILL the whole process group and wait until no process of it is left."""
        self._signal_group(signal.SIGKILL, timeout)

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM the process group (graceful shutdown); SIGKILL whatever is left after `timeout`."""
        try:
            self._signal_group(signal.SIGTERM, timeout)
        except TimeoutError:
            self.kill()

    def _signal_group(self, sig: signal.Signals, timeout: float) -> None:
        process = self.process
        if process is None:
            return
        pgid = process.pid  # start_new_session: the server leads its own group
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"server pid {pgid} did not exit after {sig.name}") from None
        deadline = time.monotonic() + timeout
        while _group_alive(pgid):  # forked workers are reparented; wait until the group is gone
            if time.monotonic() > deadline:
                raise TimeoutError(f"processes of group {pgid} survived {sig.name}")
            time.sleep(0.02)

    def signal_now(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send `sig` to the process group and return at once (safe from any thread)."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
