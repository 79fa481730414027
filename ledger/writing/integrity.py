"""Evidence that the log was cut back or rewritten, and the hold it puts on writes.

A store is evidence. When the log is shorter than something that was signed or
derived from it (a checkpoint, a witness's cosignature, the Merkle tiles beside
it), or disagrees with it, nothing may "heal" the difference away: a ledger that
rebuilt its tiles or signed a new checkpoint over the shorter log would destroy
the proof that history was rewritten and present a second history under the same
key. Instead the ledger holds: it refuses writes and checkpoints, keeps serving
reads and verification, and reports the findings (healthz, `citeledger lag`, the
logs) until an operator runs `citeledger repair`, which appends a signed
`IntegrityRepaired` entry saying what was found and what was done.

The checks here are pure functions of plain values; `RepairRecords` is a side
table (which evidence an operator has already answered for), and
`ledger.writing.integrity_records` keeps every finding durably from when it is first seen.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.storage.store import Store


@dataclass(frozen=True)
class Finding:
    """One piece of evidence. `evidence` names it stably (what a repair acknowledges)."""

    kind: str
    evidence: str
    message: str
    # What an operator needs to judge it (witness, sizes, roots), and when and by what it
    # was first seen (set once it is stored): reported, never part of its identity.
    detail: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    found_at: str | None = field(default=None, compare=False, hash=False)
    source: str | None = field(default=None, compare=False, hash=False)

    def to_json(self) -> dict[str, str]:
        """The fields an `IntegrityRepaired` entry names (its schema)."""
        return {"kind": self.kind, "evidence": self.evidence, "message": self.message}

    def describe(self) -> dict[str, Any]:
        """Everything known about it: what healthz, `lag`, `verify` and `repair` show."""
        return {**self.to_json(), "found_at": self.found_at, "source": self.source, "detail": self.detail}

    def line(self) -> str:
        """One line for the CLI: what, when, by what, the numbers."""
        numbers = ", ".join(f"{key}={value}" for key, value in sorted(self.detail.items()))
        when = f"; found {self.found_at} by {self.source}" if self.found_at else ""
        return f"{self.kind}: {self.message}{when}" + (f" [{numbers}]" if numbers else "")


class IntegrityHold(RuntimeError):
    """Writes are refused until an operator answers the findings (`citeledger repair`)."""

    code = "integrity_hold"

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = tuple(findings)
        first = self.findings[0].message if self.findings else "integrity finding"
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        super().__init__(
            f"writes refused: {first}{more}; reads and verification still work; "
            "an operator must run `citeledger repair`"
        )


def tiles_findings(
    *, log_size: int, tiles_size: int, tile_leaf: bytes | None, log_leaf: bytes | None
) -> list[Finding]:
    """The stored tiles describe `tiles_size` leaves whose last is `tile_leaf`;
    the log's entry at that size hashes to `log_leaf` (None: no such entry)."""
    if tiles_size == 0:
        return []
    if log_size < tiles_size or log_leaf is None:
        return [
            Finding(
                "log_shorter_than_tiles",
                f"tiles:{tiles_size}",
                f"the log has {log_size} entries but its Merkle tiles describe {tiles_size}: "
                f"entries {log_size + 1}..{tiles_size} were removed",
                {"log_size": log_size, "tiles_size": tiles_size},
            )
        ]
    if tile_leaf != log_leaf:
        return [
            Finding(
                "tiles_disagree",
                f"tiles:{tiles_size}",
                f"the entry at position {tiles_size} does not hash to the Merkle tiles' leaf "
                "(the entry or the tiles were rewritten)",
                {"log_size": log_size, "tiles_size": tiles_size, "tiles_leaf": (tile_leaf or b"").hex()},
            )
        ]
    return []


def damaged_tiles_finding(problem: str) -> Finding:
    return Finding("tiles_damaged", "tiles:damaged", f"the stored Merkle tiles are damaged: {problem}")


def checkpoint_findings(
    *, log_size: int, seq: int, size: int, root: bytes, root_at: Callable[[int], bytes]
) -> list[Finding]:
    """The newest signed checkpoint (#seq: size, root) against the log: it may
    not be longer, and the log's root at its size must be its root."""
    evidence = f"checkpoint:{seq}:{root.hex()}"
    detail: dict[str, Any] = {
        "log_size": log_size,
        "checkpoint_seq": seq,
        "checkpoint_size": size,
        "checkpoint_root": root.hex(),
    }
    if size > log_size:
        return [
            Finding(
                "log_shorter_than_checkpoint",
                evidence,
                f"the log has {log_size} entries but signed checkpoint #{seq} covers {size}: "
                f"entries {log_size + 1}..{size} were removed",
                detail,
            )
        ]
    if size and (log_root := root_at(size)) != root:
        return [
            Finding(
                "checkpoint_disagrees",
                evidence,
                f"the log's Merkle root at size {size} is not the root signed in checkpoint #{seq} "
                "(the log was rewritten)",
                {**detail, "log_root": log_root.hex()},
            )
        ]
    return []


def witness_findings(
    *, log_size: int, witnessed: Iterable[tuple[str, int, bytes | None]], root_at: Callable[[int], bytes]
) -> list[Finding]:
    """Each (witness name, size, root) a witness cosigned (or, root None, says it
    holds) against the log."""
    found = []
    for name, size, root in witnessed:
        evidence = f"witness:{name}:{size}"
        detail: dict[str, Any] = {"witness": name, "log_size": log_size, "witness_size": size}
        if root is not None:
            detail["witness_root"] = root.hex()
        if size > log_size:
            found.append(
                Finding(
                    "log_shorter_than_witnessed",
                    evidence,
                    f"the log has {log_size} entries but witness {name} cosigned a checkpoint of size {size}",
                    detail,
                )
            )
        elif root is not None and size and (log_root := root_at(size)) != root:
            detail["log_root"] = log_root.hex()
            found.append(
                Finding(
                    "witness_disagrees",
                    evidence,
                    f"the log's Merkle root at size {size} is not the root witness {name} cosigned",
                    detail,
                )
            )
    return found


class RepairRecords:
    """Evidence an operator answered with `citeledger repair` (and the position of
    the signed entry that says so): such a finding no longer holds writes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.table = store.create_table(
            "citeledger_integrity_repairs",
            "evidence TEXT PRIMARY KEY, position BIGINT NOT NULL, repaired_at TEXT NOT NULL",
        )

    def answered(self) -> set[str]:
        return {str(row["evidence"]) for row in self.store.rows(f"SELECT evidence FROM {self.table}")}

    def record(self, evidence: Iterable[str], position: int) -> None:
        now = dt.datetime.now(dt.UTC).isoformat()
        with self.store.transaction(commit=True) as cursor:
            for item in sorted(set(evidence)):
                cursor.execute(
                    self.store.sql(
                        f"INSERT INTO {self.table} (evidence, position, repaired_at) VALUES (?, ?, ?) "
                        "ON CONFLICT (evidence) DO NOTHING"
                    ),
                    (item, position, now),
                )


def unanswered(findings: Iterable[Finding], answered: set[str]) -> list[Finding]:
    return [finding for finding in findings if finding.evidence not in answered]


def report(findings: Sequence[Finding]) -> dict[str, Any]:
    """What healthz and `citeledger lag` show."""
    return {"ok": not findings, "findings": [finding.describe() for finding in findings]}
