"""Where the ledger keeps its data: an embedded SQLite file or PostgreSQL."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from ledger.tlog.cosignature import Witness, parse_cosigner_vkey
from ledger.tlog.note import NoteError

DEFAULT_CHECKPOINT_INTERVAL_S = 0.5
MAX_WITNESSES = 16


class SettingError(ValueError):
    """A setting with a value outside its rule; the message names both."""


def bounded_number(name: str, raw: str, kind: type[int] | type[float], low: float, high: float) -> float:
    """The setting `name`'s text `raw` as a `kind` from `low` to `high`, or a SettingError."""
    try:
        value = kind(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r}: must be a{'n integer' if kind is int else ' number'}") from None
    if not low <= value <= high:
        raise SettingError(f"{name}={raw}: must be between {low:g} and {high:g}")
    return value


@dataclass(frozen=True)
class LedgerConfig:
    """`database_url` None means the embedded default: `<data_dir>/ledger.sqlite`.

    Keys (signing keys, the data-key wrapping key) always live in
    `<data_dir>/keys`, never in the database.
    """

    data_dir: Path
    database_url: str | None = None
    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S
    run_checkpointer: bool = True
    # C2SP tlog-witnesses to send each checkpoint to: `URL VKEY` entries, `;`-separated.
    witnesses: str = ""

    @classmethod
    def from_env(cls, data_dir: str | Path | None = None, **overrides: Any) -> LedgerConfig:
        directory = Path(data_dir or os.environ.get("CITELEDGER_DATA_DIR", "./citeledger-data"))
        url = os.environ.get("CITELEDGER_DATABASE_URL") or None
        raw = os.environ.get("CITELEDGER_CHECKPOINT_INTERVAL_S", str(DEFAULT_CHECKPOINT_INTERVAL_S))
        try:
            interval = float(raw)
        except ValueError:
            raise SettingError(f"CITELEDGER_CHECKPOINT_INTERVAL_S={raw!r}: must be a number") from None
        if not 0 < interval <= 3600:
            raise SettingError(f"CITELEDGER_CHECKPOINT_INTERVAL_S={raw}: must be above 0 and at most 3600")
        witnesses = os.environ.get("CITELEDGER_WITNESSES", "")
        parse_witnesses(witnesses)  # a bad entry stops the start with one line naming it
        config = cls(
            data_dir=directory, database_url=url, checkpoint_interval_s=interval, witnesses=witnesses
        )
        return replace(config, **overrides)

    @property
    def is_postgres(self) -> bool:
        return self.database_url is not None

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "ledger.sqlite"

    @property
    def keys_dir(self) -> Path:
        return self.data_dir / "keys"

    def eventsourcing_env(self) -> dict[str, str]:
        """Environment for `eventsourcing`'s infrastructure factory."""
        if self.database_url is None:
            return {
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                # mode=rw: never open read-only. Where the file cannot be written SQLite would
                # otherwise fall back to a read-only connection, and keep it read-only after
                # the file is writable again (every write on it failing until a restart).
                "SQLITE_DBNAME": f"{self.sqlite_path.absolute().as_uri()}?mode=rw",
                "SQLITE_LOCK_TIMEOUT": "30",
            }
        url = urlparse(self.database_url)
        if url.scheme not in ("postgresql", "postgres"):
            raise SettingError("CITELEDGER_DATABASE_URL must start with postgresql://")
        try:
            port = url.port or 5432
        except ValueError:
            raise SettingError("CITELEDGER_DATABASE_URL: the port must be a number from 1 to 65535") from None
        query = parse_qs(url.query)
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": (url.path or "/").lstrip("/") or "postgres",
            "POSTGRES_HOST": url.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(port),
            "POSTGRES_USER": unquote(url.username or "postgres"),
            # eventsourcing insists on a password; under trust auth any value works.
            "POSTGRES_PASSWORD": unquote(url.password or "unused"),
            "POSTGRES_SCHEMA": query.get("schema", ["public"])[0],
            "POSTGRES_LOCK_TIMEOUT": "10",
            # One connection kept, up to 12 opened as requests need them (and closed again
            # after psycopg_pool's idle time): each kept connection is a server process, and
            # a CLI run or a short-lived worker paid ~100 ms of server CPU per pooled one.
            "POSTGRES_POOL_SIZE": "1",
            "POSTGRES_MAX_OVERFLOW": "11",
        }


@dataclass(frozen=True)
class WitnessEndpoint:
    witness: Witness
    url: str  # the submission prefix, without a trailing slash


def parse_witnesses(setting: str) -> list[WitnessEndpoint]:
    """`CITELEDGER_WITNESSES`: entries `URL VKEY` separated by `;` or newlines."""
    endpoints = []
    for raw in re.split(r"[;\n]", setting):
        entry = raw.strip()
        if not entry:
            continue
        parts = entry.split()
        if len(parts) != 2 or not parts[0].startswith(("http://", "https://")):
            raise SettingError(
                "CITELEDGER_WITNESSES: each entry must be 'URL VKEY' (entries separated by ';')"
            )
        try:
            witness = parse_cosigner_vkey(parts[1])
        except NoteError as exc:
            raise SettingError(f"CITELEDGER_WITNESSES: {exc}") from None
        endpoints.append(WitnessEndpoint(witness, parts[0].rstrip("/")))
    if len(endpoints) > MAX_WITNESSES:
        raise SettingError(f"CITELEDGER_WITNESSES: at most {MAX_WITNESSES} witnesses")
    if len({e.witness.name for e in endpoints}) != len(endpoints):
        raise SettingError("CITELEDGER_WITNESSES: two witnesses share a name")
    return endpoints
