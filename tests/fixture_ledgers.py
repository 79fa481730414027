"""Restoring a committed fixture ledger (tests/fixtures/ledgers/<version>/<store>/) into a
temporary place, as an operator restores a backup: the SQLite data directory copied, or the
PostgreSQL dump replayed with `psql` into a fresh schema plus the keys and tokens beside it.
Files get 0600 and directories 0700 here (git keeps no such modes)."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.config import LedgerConfig
from tests.conftest import PG_DSN, pg_connect

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ledgers"
STORES = ("sqlite", "postgres")
# Answer fields a later run may legitimately change (per request or per build).
# scripts/make_fixture_ledger.py records answers through `stable` and `verdict` below.
VOLATILE = ("run_id", "trace_id", "server_version", "policy_version", "metrics")


def fixture_versions() -> list[str]:
    """Every committed fixture directory (one per storage version that was ever released)."""
    return sorted(path.name for path in FIXTURES.iterdir() if (path / "sqlite" / "manifest.json").is_file())


@dataclass
class Restored:
    config: LedgerConfig
    manifest: dict[str, Any]
    schema: str | None

    @property
    def data_dir(self) -> Path:
        return self.config.data_dir


def _private_copy(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    target.chmod(0o700)
    for path in target.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)


@contextlib.contextmanager
def restore(version: str, store: str, root: Path) -> Iterator[Restored]:
    """The fixture `version` on `store`, restored under `root` (a PostgreSQL schema is dropped
    afterwards). Its idempotency records are aged as if written just now (see `_age`)."""
    source = FIXTURES / version / store
    manifest = json.loads((source / "manifest.json").read_text(encoding="utf-8"))
    data_dir = root / "data"
    _private_copy(source / "data", data_dir)
    if store == "sqlite":
        config = LedgerConfig(data_dir=data_dir)
        _age_sqlite(config, manifest)
        yield Restored(config, manifest, None)
        return
    schema = "fx_" + uuid.uuid4().hex[:16]
    dump = (source / "dump.sql").read_text(encoding="utf-8").replace(manifest["schema_token"], schema)
    try:
        done = subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", PG_DSN, "-f", "-"],
            input=dump,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        config = LedgerConfig(data_dir=data_dir, database_url=f"{PG_DSN}?schema={schema}")
        _age_postgres(schema, manifest)
        yield Restored(config, manifest, schema)
    finally:
        with pg_connect() as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _shift(manifest: dict[str, Any]) -> tuple[str, str, float]:
    """The server forgets idempotency records after 24 h; a fixture is older than that. Its
    records are moved forward by the fixture's age, as if the upgrade ran right after it was
    made (what a retry within the window must see). The manifest names where its layout
    keeps them."""
    where = manifest["idempotency"]
    return where["table"], where["created_at"], time.time() - float(manifest["made_at"])


def _age_sqlite(config: LedgerConfig, manifest: dict[str, Any]) -> None:
    table, column, shift = _shift(manifest)
    with contextlib.closing(sqlite3.connect(config.sqlite_path)) as conn, conn:
        conn.execute(f"UPDATE {table} SET {column} = {column} + ?", (shift,))


def _age_postgres(schema: str, manifest: dict[str, Any]) -> None:
    table, column, shift = _shift(manifest)
    with pg_connect() as conn:
        conn.execute(f'UPDATE "{schema}"."{table}" SET {column} = {column} + %s', (shift,))


def stable(body: Any) -> Any:
    """`body` without the fields a later run may legitimately change."""
    return without_fields(body, VOLATILE)


def without_fields(body: Any, names: Collection[str]) -> Any:
    """`body` without the members named `names`, at any depth."""
    if isinstance(body, dict):
        return {key: without_fields(value, names) for key, value in body.items() if key not in names}
    if isinstance(body, list):
        return [without_fields(item, names) for item in body]
    return body


def verdict(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """What a replay answer says that must not change (as the fixture script recorded it)."""
    if status >= 400:
        return {"status": status, "error": body["error"]["code"]}
    reason = body.get("integrity_reason") or {}
    found: dict[str, Any] = {"status": status, "integrity": body["integrity"], "cause": reason.get("cause")}
    if body.get("entries") is not None:
        found["fates"] = [entry.get("status") for entry in body["entries"]]
    return found


# Receipts whose recorded replay verdict was `unverifiable` (cause `erased_after_receipt`) when the
# fixture was made, before the verdict `reproduced_apart_from_erased` existed. Each cites one
# document that was never erased, and its as-of replay reproduces that citation at the same rank:
# the erasure of `handbook/erase-me.md` only moved corpus statistics. They now replay as
# `reproduced_apart_from_erased`, which is what is true of them; the fixtures stay byte for byte.
REPRODUCED_APART_FROM_ERASED: dict[tuple[str, str], frozenset[str]] = {
    ("v1-53a1742", "postgres"): frozenset(
        {
            "85f367c43ffd44109ea7fedf167ddfff",
            "afbfc2154ee74b669b8cba70a3fd5361",
            "ded1b3f9477f4202b8b544b7bae89343",
            "e630dd38f3b348f49fad8b807bbde0b9",
            "f23ca6b99d65499bb962093b0ea3f378",
            "f2eedf520de749cbbff85c160a93bf26",
        }
    ),
    ("v1-53a1742", "sqlite"): frozenset(
        {
            "1b0e371cedac4e0d9cea5fa7df24c0d3",
            "21a315c32bbc45d4ac67c9a1ca036bf8",
            "673bafc0526d486abdb0ea4db47dd768",
            "b34e923a6f4e4bbe9b2b301f1d90ea8e",
            "b5a6bd4e3b76447ca78194bac57f4a61",
            "f48859cb26154ab69bba48045682f34c",
        }
    ),
    ("v2-58eef80", "postgres"): frozenset(
        {
            "63012a35cd0940c0bf53c380a1fdd9f7",
            "93e48143ddb448adaec153f92d533924",
            "a6a571cc3ba947ffbc9bd5bbcb1856ed",
            "acd1e56a37c1476885061664c969bb4e",
            "b31edaab96bf4c14bb9c106ecff157df",
            "f116dc49594b4e2e9f81663eb31f0917",
        }
    ),
    ("v2-58eef80", "sqlite"): frozenset(
        {
            "0228270bf6fb46bf838c034384b48bd1",
            "04c5425b3a1f426b85f8102a361f9f01",
            "10fa3f0b4c42479abf73ad5551fa2eec",
            "706c4c6621124dac9cf3b07ba3cd219a",
            "ba871712e0284e4d8c5ea468faaaaa80",
            "c4d328d163c34f7f80038a9f72c249af",
        }
    ),
    ("v3-efa4542", "postgres"): frozenset(
        {
            "4bd50a61e7cf468083cc78d02925bc19",
            "5a23ee96cc4f4de1986d9cf888d80559",
            "792fe09468444c00b2fe10d0bc8d9b5c",
            "94e101a39ce447bb979f47d08753669b",
            "9a6801dba7834632bbae672a2dcc7269",
            "c7071af93f504b888b8da3e120de60b7",
        }
    ),
    ("v3-efa4542", "sqlite"): frozenset(
        {
            "1ddd95e406f04da6934dbb628240ff38",
            "61f46641fa014d5c9a1b50a454d3aca0",
            "9cb90d2afeb4456e88e65d5135b50282",
            "9e5ea718ec2a4d56b9290f33facfea72",
            "bc54f728cba046c0965fd285381ff31b",
            "d58f314543374f2baddbf9a7db8a39d8",
        }
    ),
}


def expected_verdict(version: str, store: str, receipt_id: str, recorded: dict[str, Any]) -> dict[str, Any]:
    """The verdict a fixture receipt must get now: the recorded one, but for the receipts above."""
    expected = {key: value for key, value in recorded.items() if key != "tenant"}
    if receipt_id in REPRODUCED_APART_FROM_ERASED.get((version, store), frozenset()):
        assert expected == {"status": 201, "integrity": "unverifiable", "cause": "erased_after_receipt"}
        expected["integrity"] = "reproduced_apart_from_erased"
    return expected


def erased_only(body: dict[str, Any]) -> bool:
    """A `reproduced_apart_from_erased` answer is right only if every entry its as-of run lost
    is of an erased document."""
    if body.get("integrity") != "reproduced_apart_from_erased":
        return True
    erased = set(body["integrity_reason"]["document_ids"])
    removed = body["diff"]["as_of_original"]["selected_entries"]["removed"]
    return all(entry["document_id"] in erased for entry in removed)


__all__ = [
    "PG_DSN",
    "REPRODUCED_APART_FROM_ERASED",
    "STORES",
    "Restored",
    "erased_only",
    "expected_verdict",
    "fixture_versions",
    "restore",
    "stable",
    "verdict",
]
