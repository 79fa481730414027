"""For the client tests: a real misbehaving HTTP peer on loopback (stdlib http.server in a
thread) that answers each request from a script — 429 with Retry-After, 408, 5xx, an empty
answer, a closed connection, an oversized body, a slow answer — and records what it got;
and the body of a valid retrieval receipt, as the real server answers it; recording a document
on a running server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests import loopback_http
from tests.api_support import Api


@dataclass
class Reply:
    status: int = 201
    body: Any = None  # dict -> JSON; bytes as is; None -> no body
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    close_without_answer: bool = False
    chunked: bool = False  # no Content-Length (the size is only known while reading)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


def envelope(code: str, retryable: bool, message: str = "scripted") -> dict[str, Any]:
    return {
        "error": {"code": code, "message": message, "retryable": retryable},
        "run_id": "r",
        "trace_id": "t",
    }


class ScriptedPeer:
    """Answers request n with script[n] (the last entry repeats)."""

    def __init__(self, script: list[Reply] | Callable[[Seen], Reply]) -> None:
        self.script = script
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                seen = Seen(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                    time.monotonic(),
                )
                with peer._lock:
                    peer.seen.append(seen)
                    index = len(peer.seen) - 1
                reply = peer._reply(index, seen)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.close_without_answer:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                payload = (
                    b""
                    if reply.body is None
                    else reply.body
                    if isinstance(reply.body, bytes)
                    else json.dumps(reply.body).encode()
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    if reply.chunked:
                        self.send_header("transfer-encoding", "chunked")
                        self.end_headers()
                        for start in range(0, len(payload), 65536):
                            part = payload[start : start + 65536]
                            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.send_header("content-length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up reading (too large, timeout)

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _reply(self, index: int, seen: Seen) -> Reply:
        if callable(self.script):
            return self.script(seen)
        return self.script[min(index, len(self.script) - 1)]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ScriptedPeer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def receipt_body(api: Api) -> dict[str, Any]:
    """A real receipt, as the real server answers POST /v1/retrievals."""
    doc = api.document()
    return api.retrieval(doc)


def retrieval(
    doc: dict[str, Any],
    task_id: str = "task-1",
    query: str = "how long are audit logs kept?",
    snippet: str = "Audit logs are kept for 180 days.",
    **fields: Any,
) -> dict[str, Any]:
    """A valid external retrieval citing the document's first chunk (`fields` adds or overrides)."""
    chunk = doc["chunks"][0]
    return {
        "query": query,
        "engine": "external:test-rag",
        "task": {"task_id": task_id},
        "selected_entries": [
            {
                "document_id": doc["document_id"],
                "chunk_id": chunk["chunk_id"],
                "score": "3.25",
                "snippet": snippet,
            }
        ],
        **fields,
    }


def post_document(base_url: str, token: str, path: str, text: str, timeout: float = 30) -> dict[str, Any]:
    """Record a document on the server at `base_url` (a new version or `dedup`) and return its answer."""
    response = loopback_http.post(
        f"{base_url}/v1/documents",
        json={"path": path, "text": text},
        headers={"Authorization": f"Bearer {token}"},
        timeout=timeout,
    )
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body
