"""Issuing, listing and revoking bearer tokens: what `citeledger tokens ...` and the
operator's `/v1/operator/tokens` routes share.

Each issue and each revocation is a signed log entry (`TokenIssued`, `TokenRevoked`:
token id, kind, tenant, scopes, expiry; the actor in the envelope; never the secret nor
its hash), so the record shows who could act when. The order keeps the record on the
safe side when a step fails: an issue is recorded before the token works, a revocation
takes effect in the tokens file before it is recorded — the log may at worst show a
token able to act that was not, never the reverse.
"""

from __future__ import annotations

import re
import secrets
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from api.auth import (
    OPERATOR_KIND,
    TENANT_KIND,
    TokenRecord,
    create_operator_token,
    create_token,
    note_revocation_entry,
    read_token_file,
    revoke_in_file,
)
from api.token_usage import read_usage
from ledger.domain.entries import EventDraft, prepare
from ledger.domain.events import TokenIssued, TokenRevoked
from ledger.domain.fields import SYSTEM_TENANT
from ledger.domain.timestamps import format_timestamp, parse_timestamp
from ledger.usecases.errors import Invalid, NotFound
from ledger.usecases.scopes import KNOWN_SCOPES
from ledger.writing.application import Ledger

TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
TOKEN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
_DURATION = re.compile(r"^([1-9][0-9]{0,5})([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_LIFETIME = timedelta(days=3660)  # ten years: a longer "expiry" is a typo


def parse_expiry(expires_in: str | None, expires_at: str | None, now: datetime | None = None) -> str | None:
    """The expiry (RFC 3339, to the second) from `expires_in` (`90m`, `12h`, `30d`) or
    `expires_at` (RFC 3339); None for a token that does not expire. Invalid names the option."""
    moment = now or datetime.now(UTC)
    if expires_in is not None and expires_at is not None:
        raise Invalid("expires_in, expires_at: give one of them, not both")
    if expires_in is not None:
        match = _DURATION.match(expires_in.strip())
        if match is None:
            raise Invalid("expires_in: a whole number and a unit s, m, h or d (e.g. 90m, 12h, 30d)")
        when = moment + timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])
    elif expires_at is not None:
        try:
            when = parse_timestamp(expires_at)
        except ValueError:
            raise Invalid("expires_at: not an RFC 3339 time (e.g. 2027-01-31T00:00:00Z)") from None
    else:
        return None
    if when <= moment:
        raise Invalid("expires_at: must be in the future")
    if when - moment > MAX_LIFETIME:
        raise Invalid("expires_at: at most ten years ahead")
    return format_timestamp(when, timespec="seconds")


def token_view(record: TokenRecord, last_used: str | None, now: float | None = None) -> dict[str, Any]:
    """What may be shown of a token: never its secret nor its hash."""
    return {
        "token_id": record.token_id,
        "kind": record.kind,
        "tenant": record.tenant or None,
        "scopes": list(record.scopes),
        "created_at": record.created_at or None,
        "expires_at": record.expires_at,
        "revoked_at": record.revoked_at,
        "last_used_at": last_used,
        "status": record.status(now),
    }


def list_tokens(path: Path) -> list[dict[str, Any]]:
    """Every token of the file (revoked and expired ones too), oldest first."""
    usage, now = read_usage(path), time.time()
    return [token_view(record, usage.get(record.token_id), now) for record in read_token_file(path)]


def _record(ledger: Ledger, payload: TokenIssued | TokenRevoked, actor: str) -> int:
    tenant = payload.tenant or SYSTEM_TENANT
    item = prepare(EventDraft.of(payload, tenant_id=tenant, actor=actor), system=True)
    return ledger.append_prepared([item])[0].position


def issue_token(
    ledger: Ledger,
    path: Path,
    *,
    actor: str,
    tenant: str | None,
    scopes: list[str],
    operator: bool = False,
    expires_at: str | None = None,
) -> tuple[str, dict[str, Any], int]:
    """A new token: (bearer value, shown once; its view; the position of its `TokenIssued`)."""
    if operator:
        if tenant is not None or scopes:
            raise Invalid("operator: an operator token takes neither a tenant nor scopes")
    else:
        if tenant is None or not TENANT_PATTERN.match(tenant):
            raise Invalid("tenant: required, and must match [a-z0-9][a-z0-9_-]{0,62}")
        if not scopes:
            raise Invalid("scopes: at least one scope is required")
        unknown = sorted(set(scopes) - KNOWN_SCOPES)
        if unknown:
            raise Invalid(f"scopes: unknown scope {', '.join(unknown)[:200]}")
        scopes = list(dict.fromkeys(scopes))
    token_id = secrets.token_hex(6)
    kind = OPERATOR_KIND if operator else TENANT_KIND
    position = _record(
        ledger,
        TokenIssued(
            token_id=token_id,
            kind=kind,  # type: ignore[arg-type]
            tenant=None if operator else tenant,
            scopes=scopes,
            expires_at=expires_at,
        ),
        actor,
    )
    if operator:
        bearer = create_operator_token(path, token_id=token_id, expires_at=expires_at)
    else:
        assert tenant is not None
        bearer = create_token(path, tenant, scopes, token_id=token_id, expires_at=expires_at)
    record = next(r for r in read_token_file(path) if r.token_id == token_id)
    return bearer, token_view(record, None), position


def revoke_token(
    ledger: Ledger, path: Path, token_id: str, *, actor: str
) -> tuple[dict[str, Any], int | None]:
    """Revoke a token of the file: (its view, the position of its `TokenRevoked`; None when
    its revocation was already recorded and nothing new was written). NotFound for an
    unknown id. When the entry cannot be written (e.g. an integrity hold), the token stays
    revoked and the error propagates; a repeat writes the missing entry."""
    if not TOKEN_ID_PATTERN.match(token_id):
        raise NotFound("token")
    changed = revoke_in_file(path, token_id)
    if changed is None:
        raise NotFound("token")
    revoked = changed[0]
    if revoked.revocation_position is not None:
        return token_view(revoked, read_usage(path).get(token_id)), None
    # Revoked now, or earlier without its entry (that write failed): record it.
    position = _record(
        ledger,
        TokenRevoked(
            token_id=token_id,
            kind=revoked.kind,  # type: ignore[arg-type]
            tenant=revoked.tenant or None,
        ),
        actor,
    )
    note_revocation_entry(path, token_id, position)
    return token_view(revoked, read_usage(path).get(token_id)), position
