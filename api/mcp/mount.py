"""The stateless Streamable HTTP mount at `/mcp`, with the MCP SDK imported on the first
`/mcp` request rather than at app creation: the SDK is about a third of the server's start-up
imports, and most servers (every worker, every test server) never answer an MCP call.

The mount sits inside the Litestar app, so `/mcp` keeps the `/v1` contract: the same
bearer-token guard and rate limit (`api.auth.requires`), the request deadline, correlation
headers, the access log and metrics of `api.contract.ContractApp`. Stateless: a request naming
a session (`Mcp-Session-Id`) is refused with the seed's 400. A mounted app's own lifespan never
runs, so the host app's lifespan holds a task group in which the session manager runs, from its
first request until the app stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus
from litestar import asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send

from api.api_error import ApiError
from api.auth import requires
from api.config import ApiConfig

MCP_PATH = "/mcp"
SESSION_REFUSED = "MCP session state is not supported"


class _SessionManager(Protocol):
    """What the mount uses of the SDK's `StreamableHTTPSessionManager`."""

    def run(self) -> AbstractAsyncContextManager[None]: ...

    async def handle_request(self, scope: Any, receive: Any, send: Any) -> None: ...


def _load_session_manager() -> Callable[[ApiConfig], _SessionManager]:
    from api.mcp.server import session_manager

    return session_manager


class _LazySessionManager:
    """Builds the session manager on first use and runs it in the lifespan's task group
    (a cancel scope must be left by the task that entered it, so not by the request)."""

    def __init__(self, config: ApiConfig) -> None:
        self._config = config
        self._manager: _SessionManager | None = None
        self._lock = anyio.Lock()
        self._task_group: TaskGroup | None = None
        self._stop = anyio.Event()

    @asynccontextmanager
    async def lifespan(self, _: Any) -> AsyncIterator[None]:
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            try:
                yield
            finally:
                self._task_group = None
                self._stop.set()

    async def get(self) -> _SessionManager:
        if self._manager is None:
            async with self._lock:
                if self._manager is None:
                    if self._task_group is None:
                        raise ApiError(503, "unavailable", "the server is not running")
                    # The import is the slow part: off the event loop, other requests go on.
                    build = await anyio.to_thread.run_sync(_load_session_manager)
                    manager = build(self._config)
                    await self._task_group.start(self._run, manager)
                    self._manager = manager
        return self._manager

    async def _run(self, manager: _SessionManager, *, task_status: TaskStatus[None]) -> None:
        async with manager.run():
            task_status.started()
            await self._stop.wait()


def mcp_mount(
    config: ApiConfig,
) -> tuple[ASGIRouteHandler, Callable[[Any], AbstractAsyncContextManager[None]]]:
    """The `/mcp` route handler and the lifespan the host app must enter."""
    sessions = _LazySessionManager(config)

    @asgi(MCP_PATH, is_mount=True, copy_scope=True, guards=[requires()])
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        """Model Context Protocol, stateless Streamable HTTP (JSON responses)."""
        if any(name == b"mcp-session-id" for name, _ in scope.get("headers", ())):
            raise ApiError(400, "bad_request", SESSION_REFUSED)
        if scope.get("path", "/") not in ("", "/"):
            raise ApiError(404, "not_found", "not found")
        if scope.get("method") != "POST":
            # Stateless: no server-to-client stream to open (GET) and no session to end (DELETE).
            # A GET would otherwise hold an SSE stream open past every deadline.
            raise ApiError(
                405, "method_not_allowed", "MCP over HTTP is stateless: POST only", headers={"Allow": "POST"}
            )
        declared = next((value for name, value in scope.get("headers", ()) if name == b"content-length"), b"")
        if declared.isdigit() and int(declared) > config.limits.max_body_bytes:
            raise ApiError(413, "payload_too_large", "request body exceeds the size limit")
        manager = await sessions.get()
        await manager.handle_request(scope, receive, send)

    return mcp_endpoint, sessions.lifespan
