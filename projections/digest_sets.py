"""Signed digest sets: `(log size, log root, read-model digests)` (the CLI's
`projection-checkpoint`; "checkpoint" alone means the log's signed Merkle checkpoint).

For a signed log checkpoint of size N, the digests are of the read models
*as of N* (see `digest`), which depend on the log prefix of size N alone, so
the digest set can be issued whenever the models have reached N and checked
later by anyone: rebuild the prefix in a scratch store and compare. Records
live in their own side table (never in the log stream), signed with the
ledger's current signing key over their canonical JSON.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ledger.config import LedgerConfig
from ledger.domain.entries import utc_now
from ledger.storage.store import Store
from ledger.tlog.canonical import canonical_json
from ledger.tlog.signing import verify_signature
from projections.digest import digests, earlier_digest
from projections.runner import ProjectionRunner
from projections.tracking import NotificationSource

if TYPE_CHECKING:
    from ledger.writing.application import Ledger

DIGEST_SETS_TABLE = "citeledger_projection_checkpoints"  # stored name: existing databases keep it
FORMAT = "citeledger-projection-checkpoint/v1"


@dataclass(frozen=True)
class SignedDigestSet:
    seq: int
    origin: str
    log_size: int
    log_root: str  # hex
    digests: dict[str, str]
    issued_at: str
    kid: str
    signature: str

    def signed_body(self) -> bytes:
        return canonical_json(
            {
                "format": FORMAT,
                "seq": self.seq,
                "origin": self.origin,
                "log_size": self.log_size,
                "log_root": self.log_root,
                "digests": self.digests,
                "issued_at": self.issued_at,
                "kid": self.kid,
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {**orjson.loads(self.signed_body()), "signature": self.signature}


@dataclass
class DigestSetReport:
    digest_set: SignedDigestSet | None
    problems: list[str] = field(default_factory=list)
    # Per signed read model, the version of it whose rebuild matched the signed digest: the
    # current one, or an earlier one for a checkpoint signed before an upgrade replaced it.
    versions: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.digest_set is not None and not self.problems


class DigestSets:
    def __init__(self, ledger: Ledger, runner: ProjectionRunner) -> None:
        self.ledger = ledger
        self.runner = runner
        self.store = runner.store
        self._last_issue = 0.0
        self.store.create_tables(
            f"CREATE TABLE IF NOT EXISTS {self.store.table(DIGEST_SETS_TABLE)} ("
            "seq BIGINT PRIMARY KEY, log_size BIGINT NOT NULL, record TEXT NOT NULL)"
        )

    def all(self) -> list[SignedDigestSet]:
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(f"SELECT record FROM {self.store.table(DIGEST_SETS_TABLE)} ORDER BY seq")
            return [_parse(row["record"]) for row in cursor.fetchall()]

    def latest(self) -> SignedDigestSet | None:
        records = self.all()
        return records[-1] if records else None

    def issue(self) -> SignedDigestSet | None:
        """Sign the read models as of the latest signed log checkpoint (None when
        there is none yet, it is already covered, or a projection is stopped short of it)."""
        log_checkpoint = self.ledger.latest_checkpoint()
        if log_checkpoint is None:
            return None
        size = log_checkpoint.tree_size
        latest = self.latest()
        if latest is not None and latest.log_size >= size:
            return latest
        if self.runner.applied_position() < size:
            self.runner.catch_up(until_position=size)
            if self.runner.applied_position() < size:
                return None
        key = self.ledger.signing_key()
        unsigned = SignedDigestSet(
            seq=(latest.seq + 1) if latest else 1,
            origin=self.ledger.origin,
            log_size=size,
            log_root=log_checkpoint.root.hex(),
            digests=digests(self.runner.projections, self.store, as_of=size),
            issued_at=utc_now(),
            kid=key.kid,
            signature="",
        )
        record = SignedDigestSet(**{**unsigned.__dict__, "signature": key.sign(unsigned.signed_body())})
        with self.store.transaction(commit=True) as cursor:
            cursor.execute(
                self.store.sql(
                    f"INSERT INTO {self.store.table(DIGEST_SETS_TABLE)} (seq, log_size, record) "
                    "VALUES (?, ?, ?) ON CONFLICT (seq) DO NOTHING"
                ),
                (record.seq, record.log_size, orjson.dumps(record.to_json()).decode()),
            )
        self._last_issue = time.monotonic()
        return record

    def maybe_issue(self, min_interval_s: float) -> SignedDigestSet | None:
        """Issue at most once per interval: digesting a large model is not free."""
        if time.monotonic() - self._last_issue < min_interval_s:
            return None
        self._last_issue = time.monotonic()
        return self.issue()

    def verify(self, digest_set: SignedDigestSet | None = None) -> DigestSetReport:
        """Check a signed digest set (default: the latest): signature, log root,
        a scratch rebuild of the log prefix, and the live read models' as-of view."""
        record = digest_set or self.latest()
        report = DigestSetReport(digest_set=record)
        if record is None:
            report.problems.append("no projection checkpoint has been issued")
            return report
        ledger = self.ledger
        public = ledger.public_keys.get(record.kid)
        if public is None:
            report.problems.append(f"signed by unknown key {record.kid}")
        elif not verify_signature(public, record.signed_body(), record.signature):
            report.problems.append("signature does not verify")
        if record.origin != ledger.origin:
            report.problems.append("checkpoint is for another log")
        if ledger.sync() < record.log_size:
            report.problems.append(f"log has fewer than {record.log_size} entries")
            return report
        if ledger.tree.root(record.log_size).hex() != record.log_root:
            report.problems.append(f"log root at size {record.log_size} differs from the signed one")
        names = [p.name for p in self.runner.projections]
        rebuilt, report.versions = rebuild_and_match(self.store, names, record.log_size, record.digests)
        live = digests(self.runner.projections, self.store, as_of=record.log_size)
        current = {p.name: p.version for p in self.runner.projections}
        for name, signed in sorted(record.digests.items()):
            version = report.versions.get(name)
            if version is None:
                report.problems.append(f"{name}: signed digest differs from a rebuild of the log prefix")
            if version is None or version == current[name]:
                if live.get(name) != signed:
                    report.problems.append(f"{name}: live read model differs from the signed digest")
            # Signed over an earlier version: the live model (this version) is held to the
            # rebuild of the same prefix, the one that reproduced the signed digest.
            elif live.get(name) != rebuilt.get(name):
                report.problems.append(
                    f"{name}: live read model (version {current[name]}) differs from a rebuild of "
                    f"the log prefix whose version {version} matches the signed digest"
                )
        return report


def rebuild_in_scratch(store: Store, names: list[str], log_size: int) -> dict[str, str]:
    """Digests (as of `log_size`) of the read models rebuilt from `store`'s log in a
    throwaway SQLite file."""
    return rebuild_and_match(store, names, log_size, {})[0]


def rebuild_and_match(
    store: Store, names: list[str], log_size: int, signed: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, int]]:
    """`rebuild_in_scratch`'s digests, and for each name in `signed`, the version of that read
    model whose digest of the rebuild equals the signed one: the current version, else the
    first of its declared earlier versions that does (none: the name is left out). An earlier
    version's digest is computed from the same rebuild and the log's entries of the same
    prefix, never from the checked store's read models."""
    with tempfile.TemporaryDirectory(prefix="citeledger-verify-") as directory:
        scratch = Store(LedgerConfig(data_dir=Path(directory), run_checkpointer=False))
        try:
            runner = ProjectionRunner(scratch, source=NotificationSource(store), batch_size=2_000)
            selected = [runner.projection(name) for name in names]
            runner.catch_up(stop_position=log_size, names=names)
            rebuilt = digests(selected, scratch, as_of=log_size)
            matched: dict[str, int] = {}
            for projection in selected:
                wanted = signed.get(projection.name)
                if wanted is None:
                    continue
                if rebuilt.get(projection.name) == wanted:
                    matched[projection.name] = projection.version
                    continue
                for earlier in projection.earlier_versions:
                    if earlier_digest(projection, earlier, scratch, store, as_of=log_size) == wanted:
                        matched[projection.name] = earlier.version
                        break
            return rebuilt, matched
        finally:
            scratch.close()


def _parse(text: str) -> SignedDigestSet:
    value = orjson.loads(text)
    return SignedDigestSet(
        seq=int(value["seq"]),
        origin=str(value["origin"]),
        log_size=int(value["log_size"]),
        log_root=str(value["log_root"]),
        digests={str(k): str(v) for k, v in value["digests"].items()},
        issued_at=str(value["issued_at"]),
        kid=str(value["kid"]),
        signature=str(value["signature"]),
    )
