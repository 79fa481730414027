"""Console sessions: a bearer token exchanged, once, for a server-side session.

The browser holds only a random session id (an HttpOnly, SameSite=Strict cookie, Secure
when the request came over TLS). The server keeps, per session, the SHA-256 of the token
(never the token), a CSRF token and the expiry, in Litestar's `FileStore` under
`<data-dir>/console-sessions` (0700; the store writes its files 0600). Every request
resolves the token again from its digest, so a token removed from `tokens.json` ends its
console sessions at once.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from litestar.stores.file import FileStore

from api.auth import Principal, TokenStore, digest

COOKIE = "citeledger_console"
SESSION_SECONDS = 8 * 3600  # a working day; then sign in again
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class ConsoleSession:
    session_id: str
    token_sha256: str
    csrf_token: str

    def csrf_ok(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented, self.csrf_token)


class ConsoleSessions:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
        self.store = FileStore(directory)

    async def open(self, bearer: str) -> ConsoleSession:
        session = ConsoleSession(secrets.token_urlsafe(32), digest(bearer), secrets.token_urlsafe(32))
        value = {"token_sha256": session.token_sha256, "csrf_token": session.csrf_token}
        await self.store.set(self._key(session.session_id), orjson.dumps(value), expires_in=SESSION_SECONDS)
        return session

    async def find(self, session_id: str | None) -> ConsoleSession | None:
        if not session_id or len(session_id) > 128:
            return None
        raw = await self.store.get(self._key(session_id))
        if raw is None:
            return None
        value: dict[str, Any] = orjson.loads(raw)
        return ConsoleSession(session_id, str(value["token_sha256"]), str(value["csrf_token"]))

    async def close(self, session_id: str) -> None:
        await self.store.delete(self._key(session_id))

    @staticmethod
    def _key(session_id: str) -> str:
        return "session:" + session_id  # FileStore names the file by a hash of the key


def principal_of_session(tokens: TokenStore, session: ConsoleSession) -> Principal | None:
    """The token behind a session, if it still exists (constant-time compare of digests)."""
    return tokens.authenticate_digest(session.token_sha256)
