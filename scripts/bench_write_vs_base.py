"""The write path against a base commit, side by side in one run: two real `citeledger serve`
processes on SQLite (this checkout's and a base checkout's, each from its own venv), the same
requests alternated between them. Measures events/s of `POST /v1/retrievals/batch` (500 per
request) and of single `POST /v1/retrievals`, and a search's latency; prints ratios new ÷ base.

    python scripts/bench_write_vs_base.py --base-venv /tmp/base/.venv [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from _support import DOC
from _support import retrieval_body as _body  # the request body bench_floor.py sends too

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-write-token-0123456789abcdef"


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(venv: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    env = {
        **os.environ,
        "CITELEDGER_BOOTSTRAP_TOKEN": TOKEN,
        "CITELEDGER_RATE_LIMIT_RPS": "100000",
        "CITELEDGER_RATE_LIMIT_BURST": "100000",
    }
    process = subprocess.Popen(
        [str(venv / "bin" / "citeledger"), "serve", "--data-dir", str(data), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(base + "/v1/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{venv} did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-venv", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        for name, venv in (("new", ROOT / ".venv"), ("base", args.base_venv)):
            servers[name] = _serve(venv, Path(tmp) / name)
        try:
            clients = {
                n: httpx.Client(base_url=b, headers=headers, timeout=120) for n, (_, b) in servers.items()
            }
            document = {"path": "a.md", "text": DOC}
            docs = {n: c.post("/v1/documents", json=document).json() for n, c in clients.items()}
            batch: dict[str, list[float]] = {"new": [], "base": []}
            single: dict[str, list[float]] = {"new": [], "base": []}
            search: dict[str, list[float]] = {"new": [], "base": []}
            counter = 0
            for _ in range(args.rounds):
                for name, client in clients.items():
                    counter += 1
                    items = [
                        {"idempotency_key": f"k-{counter}-{i}", "retrieval": _body(docs[name], i)}
                        for i in range(500)
                    ]
                    started = time.perf_counter()
                    answer = client.post("/v1/retrievals/batch", json={"items": items})
                    assert answer.status_code in (200, 201, 207), answer.text[:300]
                    batch[name].append(500 / (time.perf_counter() - started))
                    started = time.perf_counter()
                    for i in range(50):
                        assert client.post("/v1/retrievals", json=_body(docs[name], i)).status_code == 201
                    single[name].append(50 / (time.perf_counter() - started))
                    for _ in range(20):
                        started = time.perf_counter()
                        body = {"input": {"query": "how long are backups kept", "top_k": 5}}
                        assert client.post("/v1/search", json=body).status_code == 200
                        search[name].append((time.perf_counter() - started) * 1000)
            med = statistics.median
            print("| measure | new | base | new ÷ base |\n| --- | --- | --- | --- |")
            for label, data in (
                ("batched retrievals (events/s)", batch),
                ("single retrievals (events/s)", single),
                ("search median (ms)", search),
            ):
                print(
                    f"| {label} | {med(data['new']):.0f} | {med(data['base']):.0f} | "
                    f"{med(data['new']) / med(data['base']):.2f}× |"
                )
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(timeout=30)


if __name__ == "__main__":
    main()
