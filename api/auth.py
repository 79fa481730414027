"""Bearer tokens: each bound to one tenant and a set of scopes, or an operator's.

An operator token is bound to no tenant and holds no scope: its only powers are
the whole-log export and managing tokens (`requires_operator`); every tenant route
refuses it (403), and a tenant token, whatever its scopes, gets neither.

Secrets are stored only as SHA-256 digests (a token secret is 32 random
bytes, so a slow hash adds nothing) and compared in constant time. Tokens
come from `<data-dir>/tokens.json` (mode 0600, re-read when it changes, so
`citeledger tokens create` takes effect in running workers) and/or from
`CITELEDGER_TOKENS` (a JSON list of the same hashed records).

A token may carry an expiry (`expires_at`) and is revoked by marking its record
(`revoked_at`, kept so the id is never reused and `tokens list` still shows it); an
expired or revoked token authenticates nothing and gets the same 401 as an unknown
one. Workers re-read the file at most a second after it changes, so a revocation takes
effect on every worker that reads the same file within about a second
(`api.token_admin` writes the signed entries; `api.token_usage` keeps "last used").

A token reads `clt_<token_id>_<secret>`; a bootstrap token may be any value
chosen by the operator (`CITELEDGER_BOOTSTRAP_TOKEN`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from api.contract import set_principal
from api.ratelimit import RATE_CHECKED
from api.token_usage import UsageNotes
from ledger.domain.timestamps import parse_timestamp, utc_now
from ledger.usecases.scopes import KNOWN_SCOPES, SCOPES

BOOTSTRAP_TOKEN_ID = "bootstrap"  # noqa: S105 - an id, not a secret
OPERATOR_KIND = "operator"
TENANT_KIND = "tenant"
_RELOAD_EVERY_S = 1.0


@dataclass(frozen=True)
class Principal:
    token_id: str
    tenant: str  # "" for an operator token
    scopes: frozenset[str]
    operator: bool = False

    @property
    def actor(self) -> str:
        return f"token:{self.token_id}"


@dataclass(frozen=True)
class TokenRecord:
    token_id: str
    tenant: str
    scopes: tuple[str, ...]
    secret_sha256: str
    created_at: str
    kind: str = TENANT_KIND
    expires_at: str | None = None
    revoked_at: str | None = None
    # The log position of its `TokenRevoked` entry: None while the entry is not written yet
    # (the revocation takes effect first; a repeat of `revoke` writes the missing entry).
    revocation_position: int | None = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "token_id": self.token_id,
            "kind": self.kind,
            "tenant": self.tenant,
            "scopes": list(self.scopes),
            "secret_sha256": self.secret_sha256,
            "created_at": self.created_at,
        }
        for name in ("expires_at", "revoked_at", "revocation_position"):  # absent while unset
            if getattr(self, name) is not None:
                value[name] = getattr(self, name)
        return value

    def status(self, now: float | None = None) -> str:
        """`active`, `expired` or `revoked` (at `now`, epoch seconds; default: now)."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None:
            moment = time.time() if now is None else now
            if parse_timestamp(self.expires_at).timestamp() <= moment:
                return "expired"
        return "active"

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TokenRecord:
        scopes = tuple(str(s) for s in value["scopes"])
        unknown = set(scopes) - KNOWN_SCOPES
        if unknown:
            raise ValueError(f"token {value.get('token_id')}: unknown scopes {sorted(unknown)}")
        kind = str(value.get("kind", TENANT_KIND))
        tenant = str(value.get("tenant") or "")
        if kind == OPERATOR_KIND and (tenant or scopes):
            raise ValueError(f"token {value.get('token_id')}: an operator token has no tenant and no scopes")
        if kind not in (OPERATOR_KIND, TENANT_KIND) or (kind == TENANT_KIND and not tenant):
            raise ValueError(
                f"token {value.get('token_id')}: a token is bound to a tenant or is an operator's"
            )
        expires_at, revoked_at = value.get("expires_at"), value.get("revoked_at")
        for moment in (expires_at, revoked_at):
            if moment is not None:
                parse_timestamp(str(moment))  # ValueError names no secret: a bad file fails loudly
        return cls(
            token_id=str(value["token_id"]),
            tenant=tenant,
            scopes=scopes,
            secret_sha256=str(value["secret_sha256"]).lower(),
            created_at=str(value.get("created_at", "")),
            kind=kind,
            expires_at=None if expires_at is None else str(expires_at),
            revoked_at=None if revoked_at is None else str(revoked_at),
            revocation_position=None
            if value.get("revocation_position") is None
            else int(value["revocation_position"]),
        )


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def read_token_file(path: Path) -> list[TokenRecord]:
    if not path.exists():
        return []
    document = json.loads(path.read_text(encoding="utf-8") or "{}")
    return [TokenRecord.from_json(item) for item in document.get("tokens", [])]


@contextlib.contextmanager
def token_file_lock(path: Path) -> Iterator[None]:
    """Serialises read-modify-write of the tokens file between processes (the CLI and every
    API worker), so two concurrent changes never lose one another."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_token_file(path: Path, records: list[TokenRecord]) -> None:
    """Replace the file atomically (0600); call under `token_file_lock`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"tokens": [r.to_json() for r in records]}, handle, indent=2)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def create_token(
    path: Path,
    tenant: str,
    scopes: list[str],
    *,
    secret: str | None = None,
    token_id: str | None = None,
    expires_at: str | None = None,
) -> str:
    """Add a token to the file; returns the full bearer value (shown once, never stored)."""
    unknown = set(scopes) - KNOWN_SCOPES
    if unknown:
        raise ValueError(f"unknown scopes: {', '.join(sorted(unknown))}")
    if not scopes:
        raise ValueError("at least one scope is required")
    token_id = token_id or secrets.token_hex(6)
    bearer = secret if secret is not None else f"clt_{token_id}_{secrets.token_urlsafe(32)}"
    created = utc_now(timespec="seconds")
    _add(path, TokenRecord(token_id, tenant, tuple(scopes), digest(bearer), created, expires_at=expires_at))
    return bearer


def create_operator_token(
    path: Path, *, secret: str | None = None, token_id: str | None = None, expires_at: str | None = None
) -> str:
    """Add an operator token (no tenant, no scope: whole-log export only); returns the bearer value."""
    token_id = token_id or secrets.token_hex(6)
    bearer = secret if secret is not None else f"clt_{token_id}_{secrets.token_urlsafe(32)}"
    created = utc_now(timespec="seconds")
    record = TokenRecord(token_id, "", (), digest(bearer), created, kind=OPERATOR_KIND, expires_at=expires_at)
    _add(path, record)
    return bearer


def _add(path: Path, record: TokenRecord) -> None:
    with token_file_lock(path):
        records = read_token_file(path)
        if any(r.token_id == record.token_id and r.revoked_at is not None for r in records):
            raise ValueError(f"token id {record.token_id} was revoked; a revoked id is never reused")
        records = [r for r in records if r.token_id != record.token_id]
        records.append(record)
        write_token_file(path, records)


def revoke_in_file(path: Path, token_id: str) -> tuple[TokenRecord, bool] | None:
    """Mark a token revoked: (its record now, whether this call revoked it); None when the
    file holds no such token. The record stays, so the id is never reused."""
    with token_file_lock(path):
        records = read_token_file(path)
        found = next((r for r in records if r.token_id == token_id), None)
        if found is None:
            return None
        if found.revoked_at is not None:
            return found, False
        # To the microsecond: when the revocation took effect, before its entry was written.
        revoked = TokenRecord(**{**found.__dict__, "revoked_at": utc_now()})
        write_token_file(path, [revoked if r.token_id == token_id else r for r in records])
    return revoked, True


def note_revocation_entry(path: Path, token_id: str, position: int) -> None:
    """Remember where a revocation's signed entry is (so a repeat does not write another)."""
    with token_file_lock(path):
        records = read_token_file(path)
        write_token_file(
            path,
            [
                TokenRecord(**{**r.__dict__, "revocation_position": position})
                if r.token_id == token_id
                else r
                for r in records
            ],
        )


def ensure_bootstrap_token(path: Path, bootstrap_secret: str | None) -> str | None:
    """On first start: an all-scopes token for tenant `default`. Returns the bearer value
    when one was created now (to print once), None when tokens already exist."""
    if read_token_file(path):
        return None
    return create_token(path, "default", list(SCOPES), secret=bootstrap_secret, token_id=BOOTSTRAP_TOKEN_ID)


class TokenStore:
    def __init__(self, path: Path, env_records: str | None = None) -> None:
        self.path = path
        self._env = [TokenRecord.from_json(item) for item in json.loads(env_records)] if env_records else []
        self._lock = threading.Lock()
        self._by_id: dict[str, TokenRecord] = {}
        self._all: list[TokenRecord] = []
        self._version: tuple[int, int, int] | None = (-1, -1, -1)
        self._expiry: dict[str, float] = {}
        self._principals: dict[str, tuple[TokenRecord, Principal]] = {}
        self.usage = UsageNotes(path)
        self._checked = 0.0
        self._reload(force=True)

    def _reload(self, force: bool = False, *, unthrottled: bool = False) -> None:
        now = time.monotonic()
        if not force and not unthrottled and now - self._checked < _RELOAD_EVERY_S:
            return
        with self._lock:
            self._checked = now
            try:
                # The file is replaced whole (a new inode) on every change: inode, size and
                # mtime in nanoseconds tell a change apart even within one clock tick.
                info = self.path.stat()
                version: tuple[int, int, int] | None = (info.st_ino, info.st_size, info.st_mtime_ns)
            except FileNotFoundError:
                version = None
            if not force and version == self._version:
                return
            records = [*self._env, *read_token_file(self.path)]
            self._by_id = {r.token_id: r for r in records}
            self._all = records
            self._principals = {}
            # Expiries as epoch seconds, parsed once per reload, not per request.
            self._expiry = {
                r.token_id: parse_timestamp(r.expires_at).timestamp()
                for r in records
                if r.expires_at is not None
            }
            self._version = version

    def refresh(self) -> None:
        """Re-read now: the worker that changed the file sees its own change at once."""
        self._reload(force=True)

    def authenticate(self, bearer: str) -> Principal | None:
        self._reload()
        candidates: list[TokenRecord] | None = None
        token_id = bearer.split("_", 2)[1] if bearer.startswith("clt_") and bearer.count("_") >= 2 else None
        if token_id is not None and token_id not in self._by_id:
            # A token made a moment ago (by the CLI, another worker): one stat, not a second's wait.
            # Revocation keeps its bound (a known token is re-checked at most every second).
            self._reload(unthrottled=True)
        if token_id is not None:
            record = self._by_id.get(token_id)
            candidates = [record] if record is not None else []
        # else: an operator-chosen bootstrap value: compare against every record
        return self._principal(digest(bearer), candidates)

    def authenticate_digest(self, presented: str) -> Principal | None:
        """The token whose SHA-256 this is (a console session keeps the digest, never the token)."""
        self._reload()
        return self._principal(presented, None)

    def _principal(self, presented: str, candidates: list[TokenRecord] | None) -> Principal | None:
        if candidates is None:
            candidates = self._all
        found: TokenRecord | None = None
        for record in candidates:
            if hmac.compare_digest(presented, record.secret_sha256):
                found = record
        # A revoked or expired token is refused exactly like an unknown one (same 401).
        if found is None or found.revoked_at is not None:
            return None
        expiry = self._expiry.get(found.token_id)
        if expiry is not None and expiry <= time.time():
            return None
        self.usage.used(found.token_id)
        # One Principal per record (frozen: shared safely), rebuilt when the record is another.
        cached = self._principals.get(found.token_id)
        if cached is not None and cached[0] is found:
            return cached[1]
        principal = Principal(
            found.token_id, found.tenant, frozenset(found.scopes), operator=found.kind == OPERATOR_KIND
        )
        self._principals[found.token_id] = (found, principal)
        return principal


def bearer_of(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    return bearer_in(connection.headers.get("authorization"))


def bearer_in(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value; None for any other."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def principal_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    principal = connection.scope.get("state", {}).get("citeledger.principal")
    if not isinstance(principal, Principal):
        raise NotAuthorizedException()
    return principal


async def _authenticated(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """A valid token (401), within its rate limit (429)."""
    services = connection.app.state.services
    principal = principal_for(services.tokens, bearer_of(connection))
    set_principal(connection.scope, principal)
    state = connection.scope["state"]
    if RATE_CHECKED not in state:
        await services.rate_limiter.check(principal.token_id)
    elif (refusal := state.pop(RATE_CHECKED)) is not None:  # checked by `api.receipt_shortcut`
        raise refusal
    return principal


def principal_for(tokens: TokenStore, bearer: str | None) -> Principal:
    """The one token check of every surface (HTTP routes, the MCP transports): 401 unless
    `bearer` is a valid token."""
    principal = tokens.authenticate(bearer) if bearer else None
    if principal is None:
        raise NotAuthorizedException()
    return principal


def check_scopes(principal: Principal, scopes: tuple[str, ...]) -> None:
    """A tenant token holding every scope (403). An operator token is bound to no tenant,
    so nothing a tenant may ask serves it (403)."""
    if principal.operator:
        raise PermissionDeniedException(
            detail="an operator token is bound to no tenant; it only exports the whole log and manages tokens"
        )
    missing = [s for s in scopes if s not in principal.scopes]
    if missing:
        raise PermissionDeniedException(detail=f"token lacks scope {', '.join(missing)}")


def requires(*scopes: str) -> Any:
    """Guard: a valid tenant token (401), within its rate limit (429), holding every scope (403).
    An operator token is bound to no tenant, so no tenant route serves it (403)."""
    for scope in scopes:
        assert scope in SCOPES, scope

    async def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        check_scopes(await _authenticated(connection), scopes)

    guard.__name__ = "requires_" + "_".join(s.replace(".", "_") for s in scopes)
    return guard


async def requires_operator(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard: an operator token (`citeledger tokens create --operator`); a tenant's token,
    even with `admin`, is refused (403), since the whole log holds every tenant's entries."""
    principal = await _authenticated(connection)
    if not principal.operator:
        raise PermissionDeniedException(
            detail="the whole-log export and token management need an operator token "
            "(citeledger tokens create --operator); a tenant token exports its own tenant at GET /v1/export"
        )
