"""The HTTP protocol `citeledger serve` runs: uvicorn's httptools protocol whose writes made
in one turn of the event loop leave as one `write`.

uvicorn writes a response's status line and headers when the app sends
`http.response.start`, and its body on the next message: two system calls and two TCP
segments on a `TCP_NODELAY` socket for every small JSON answer, each waking the client.
Sampled under load, the first of them was the largest single cost of a cached receipt read
(`docs/benchmarks/api.md`, "where the time went"). Here both are held until the end of the
turn (they come in the same one: nothing in between waits) and written together. The bytes
on the wire are the same; a stream is still written as it comes (each turn's part, and at
once past `FLUSH_AT_BYTES`), and a close writes what is held first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FLUSH_AT_BYTES = 64 * 1024  # held no longer than this: a stream never piles up in memory


class CoalescingTransport:
    """A transport whose `write`s are joined until the loop's next turn (or `FLUSH_AT_BYTES`);
    everything else is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))
        self._held_bytes += len(data)
        if self._held_bytes >= FLUSH_AT_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held, self._held_bytes = [], 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    # What uvicorn asks on every request, without the `__getattr__` detour.
    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalescing: Any = CoalescingTransport(transport, self.loop)
        super().connection_made(coalescing)
