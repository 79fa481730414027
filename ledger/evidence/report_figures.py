"""The figures of a record-keeping report, computed from signed entries alone.

One function, `compute_figures`, used twice: by the use case that writes the report
(`ledger.usecases.report`) and by the offline checker (`ledger.evidence.report_check`),
which recomputes every figure from the entries in the report's evidence and compares it
with the manifest. A figure is a plain dict: `id`, `section`, `label`, `value` (a count, a
rate, a table of rows or a series by day) and `positions`, the log positions it was
computed from as ascending `[first, last]` runs. Nothing here reads a store.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.domain.fields import SYSTEM_TENANT
from ledger.domain.timestamps import parse_timestamp

# /2: the counted entries compressed (evidence/entries.ndjson.zst). A checker names what it
# does not check rather than reading an earlier layout with other rules.
REPORT_FORMAT = "citeledger-report/2"
EARLIER_FORMATS = {"citeledger-report/1": "its counted entries uncompressed in evidence/entries.ndjson"}
SAMPLE_SIZE = 20  # receipts in the reproducible sample
MAX_TABLE_ROWS = 500  # rows a table lists (its count figure still counts every entry)
SIX_MONTHS_DAYS = 183  # Art. 19(1), 26(6): "at least six months"
# The ledger's own entries a tenant's report counts: key rotations and repairs concern every tenant.
LEDGER_TYPES = frozenset({"SigningKeyRotated", "IntegrityRepaired"})
SECTIONS = (
    "coverage",
    "retrievals",
    "access",
    "erasures",
    "retention",
    "policies",
    "replays",
    "integrity",
)

_UNSEEN = object()
Figure = dict[str, Any]
Envelope = Mapping[str, Any]


@dataclass(frozen=True)
class Period:
    """[start, end) in UTC."""

    start: datetime
    end: datetime

    def holds(self, recorded_at: str) -> bool:
        return self.start <= parse_timestamp(recorded_at) < self.end


def runs(positions: Iterable[int]) -> list[list[int]]:
    """Ascending positions as `[first, last]` runs: a million contiguous positions are one pair."""
    out: list[list[int]] = []
    for position in sorted(positions):
        if out and out[-1][1] + 1 == position:
            out[-1][1] = position
        else:
            out.append([position, position])
    return out


def sample_key(seed: str, receipt_id: str) -> str:
    return hashlib.sha256(f"{seed}\n{receipt_id}".encode()).hexdigest()


class _SampleKeys:
    """`sample_key(seed, ·)` with the seed's part hashed once (a million receipts a month)."""

    def __init__(self, seed: str) -> None:
        self.prefix = hashlib.sha256(f"{seed}\n".encode())

    def __call__(self, receipt_id: str) -> str:
        digest = self.prefix.copy()
        digest.update(receipt_id.encode())
        return digest.hexdigest()


def _rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "n/a"


class _Table:
    """A count of every row, and the rows themselves up to `MAX_TABLE_ROWS`."""

    def __init__(self, fid: str, section: str, label: str) -> None:
        self.fid, self.section, self.label = fid, section, label
        self.positions: list[int] = []
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self.positions.append(row["position"])
        if len(self.rows) < MAX_TABLE_ROWS:
            self.rows.append(row)

    def figures(self) -> list[Figure]:
        return [
            _figure(f"{self.fid}.count", self.section, self.label, len(self.positions), self.positions),
            _figure(self.fid, self.section, self.label, self.rows, (row["position"] for row in self.rows)),
        ]


def _figure(fid: str, section: str, label: str, value: Any, positions: Iterable[int]) -> Figure:
    return {"id": fid, "section": section, "label": label, "value": value, "positions": runs(positions)}


def _row(entry: Envelope, **fields: Any) -> dict[str, Any]:
    return {
        "position": entry["position"],
        "recorded_at": entry["recorded_at"],
        "actor": entry["actor"],
        **fields,
    }


def _copied(source: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """The named fields of a payload as they stand, in that order (a table's columns)."""
    return {name: source[name] for name in names}


def _scrub_row(e: Envelope) -> dict[str, Any]:
    p = e["payload"]
    return _row(
        e,
        reason=p["reason"],
        documents=len(p.get("document_ids", [])),
        citations=len(p.get("citation_ids", [])),
        keys=len(p["key_refs"]),
    )


class FigureBuilder:
    """Every figure of a report, fed one entry at a time (a million entries are never held):
    the tenant's entries recorded in the period and the ledger's own key and repair entries,
    ascending by position. `context` holds the entries before the period a figure names
    (`oldest_receipt`, `policy_at_start`); `seed` draws the reproducible receipt sample."""

    def __init__(
        self, *, tenant_id: str, period: Period, seed: str, context: Mapping[str, Envelope | None]
    ) -> None:
        self.tenant_id, self.period, self.seed, self.context = tenant_id, period, seed, context
        self.sample_key = _SampleKeys(seed)
        self.handlers: dict[str, Any] = {}  # kind -> its `_on_<kind>` method or None, looked up once
        self.every: list[int] = []
        self.last: int | None = None  # the position added last (a part's: the one before it)
        self.by_type: dict[str, list[int]] = defaultdict(list)
        self.by_day: dict[str, Counter[str]] = defaultdict(Counter)
        self.receipts: list[int] = []
        self.groups: dict[str, dict[str, list[int]]] = {"engine": {}, "service": {}, "status": {}, "mode": {}}
        self.sample: list[tuple[str, dict[str, Any]]] = []
        self.sample_cut: str | None = None  # a key at or above it cannot be drawn any more
        self.tables = {
            name: _Table(name, name.split(".")[0], label)
            for name, label in (
                ("access.denials", "reads denied"),
                ("access.content_reads", "content read in plain"),
                ("erasures.erasures", "erasures"),
                ("erasures.holds_placed", "legal holds placed"),
                ("erasures.holds_released", "legal holds released"),
                ("retention.expiries", "retention expiries applied"),
                ("replays.replays", "replays run"),
                ("integrity.findings", "integrity findings and repairs"),
                ("integrity.key_rotations", "signing keys introduced"),
                ("integrity.reports", "earlier reports issued"),
            )
        }
        self.drift: list[int] = []
        self.rules: dict[tuple[str, str], dict[str, Any]] = {}
        self.bundles: list[Envelope] = []  # published in the period

    def add(self, entry: Envelope) -> None:
        owner, kind, position = entry["tenant_id"], entry["type"], entry["position"]
        if owner != self.tenant_id and not (owner == SYSTEM_TENANT and kind in LEDGER_TYPES):
            raise ValueError(f"position {position}: an entry of {owner!r} in a report of {self.tenant_id!r}")
        if self.last is not None and position <= self.last:
            raise ValueError(f"position {position}: listed twice or out of order")
        self.every.append(position)
        self.last = position
        self.by_type[kind].append(position)
        self.by_day[entry["recorded_at"][:10]][kind] += 1
        handler = self.handlers.get(kind, _UNSEEN)
        if handler is _UNSEEN:
            handler = self.handlers[kind] = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(entry, entry["payload"])

    def __getstate__(self) -> dict[str, Any]:
        """What a part computed in a worker process sends back (the bound handlers and the
        seed's hash state are rebuilt on arrival)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("handlers", "sample_key")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.handlers, self.sample_key = {}, _SampleKeys(self.seed)

    def merge(self, part: FigureBuilder) -> None:
        """Take in `part`, a builder fed the entries that follow this one's (its `last` set to
        this one's before it was fed): the figures come out as if one builder had been fed all."""
        self.every.extend(part.every)
        self.last = part.last if part.every else self.last
        for kind, positions in part.by_type.items():
            self.by_type[kind].extend(positions)
        for day, counts in part.by_day.items():
            self.by_day[day].update(counts)
        self.receipts.extend(part.receipts)
        for axis, keyed in part.groups.items():
            for group, positions in keyed.items():
                self.groups[axis].setdefault(group, []).extend(positions)
        # Kept in feeding order: the sample's stable sort breaks equal keys the same way.
        self.sample = sorted(self.sample + part.sample, key=lambda item: item[0])[:SAMPLE_SIZE]
        self.sample_cut = self.sample[-1][0] if len(self.sample) == SAMPLE_SIZE else None
        for name, table in part.tables.items():
            mine = self.tables[name]
            mine.positions.extend(table.positions)
            mine.rows.extend(table.rows[: MAX_TABLE_ROWS - len(mine.rows)])
        self.drift.extend(part.drift)
        for key, row in part.rules.items():
            self.rules.setdefault(key, row)
        self.bundles.extend(part.bundles)

    def _on_RetrievalRecorded(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.receipts.append(e["position"])
        for axis, group in (
            ("engine", p["engine"]),
            ("service", e["actor"]),
            ("status", p["status"]),
            ("mode", p["mode"]),
        ):
            self.groups[axis].setdefault(group, []).append(e["position"])
        key = self.sample_key(p["receipt_id"])
        if self.sample_cut is not None and key >= self.sample_cut:
            return  # (a later equal key sorts after the kept ones: it could not be drawn either)
        row = _row(
            e,
            receipt_id=p["receipt_id"],
            engine=p["engine"],
            status=p["status"],
            citations=len(p["selected_entries"]),
        )
        self.sample.append((key, row))
        if len(self.sample) > 4 * SAMPLE_SIZE:  # keep the smallest keys only (a stable sort)
            self.sample = sorted(self.sample, key=lambda item: item[0])[:SAMPLE_SIZE]
            self.sample_cut = self.sample[-1][0]

    def _on_AccessDenied(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.tables["access.denials"].add(
            _row(e, **_copied(p, "resource_type", "resource_id", "required_scope", "reason"))
        )

    def _on_ContentRead(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.tables["access.content_reads"].add(
            _row(e, entries_read=len(p["positions"]), receipts=len(p.get("receipt_ids", [])))
        )

    def _on_RetentionScrubbed(self, e: Envelope, p: Mapping[str, Any]) -> None:
        name = "retention.expiries" if p["reason"] == "retention_expired" else "erasures.erasures"
        self.tables[name].add(_scrub_row(e))

    def _on_LegalHoldPlaced(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.tables["erasures.holds_placed"].add(
            _row(
                e,
                hold_id=p["hold_id"],
                documents=len(p.get("document_ids", [])),
                subjects=len(p.get("subject_ids", [])),
            )
        )

    def _on_LegalHoldReleased(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.tables["erasures.holds_released"].add(_row(e, hold_id=p["hold_id"]))

    def _on_DocumentIngested(self, e: Envelope, p: Mapping[str, Any]) -> None:
        days = p.get("retention_days")
        key = (p["source"], "none" if days is None else str(days))
        if key not in self.rules:
            self.rules[key] = _row(
                e, source=p["source"], retention_days=days, origin=p.get("retention_origin")
            )

    def _on_PolicyBundlePublished(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.bundles.append(e)

    def _on_ReplayRecorded(self, e: Envelope, p: Mapping[str, Any]) -> None:
        summary = p["summary"]
        self.tables["replays.replays"].add(
            _row(
                e,
                original_receipt_id=p["original_receipt_id"],
                **_copied(summary, "context_hash_changed", "entries_added", "entries_removed"),
            )
        )
        if summary["context_hash_changed"]:
            self.drift.append(e["position"])
        if p.get("integrity_finding"):
            self.tables["integrity.findings"].add(_row(e, kind="replay", finding=p["integrity_finding"]))

    def _on_IntegrityRepaired(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.tables["integrity.findings"].add(
            _row(e, kind="repair", finding=", ".join(f["kind"] for f in p["findings"]))
        )

    def _on_SigningKeyRotated(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.tables["integrity.key_rotations"].add(_row(e, **_copied(p, "new_kid", "previous_kid")))

    def _on_ReportIssued(self, e: Envelope, p: Mapping[str, Any]) -> None:
        self.tables["integrity.reports"].add(_row(e, **_copied(p, "report_id", "manifest_sha256")))

    def figures(self) -> list[Figure]:
        out = [_figure("coverage.entries", "coverage", "entries in the period", len(self.every), self.every)]
        for kind in sorted(self.by_type):
            out.append(
                _figure(
                    f"coverage.type.{kind}",
                    "coverage",
                    f"{kind} entries",
                    len(self.by_type[kind]),
                    self.by_type[kind],
                )
            )
        series = {day: dict(sorted(counts.items())) for day, counts in sorted(self.by_day.items())}
        out.append(_figure("coverage.by_day", "coverage", "entries by day and type", series, self.every))
        out.append(
            _figure(
                "retrievals.total", "retrievals", "retrievals recorded", len(self.receipts), self.receipts
            )
        )
        for axis, keyed in self.groups.items():
            for key in sorted(keyed):
                out.append(
                    _figure(
                        f"retrievals.{axis}.{key}",
                        "retrievals",
                        f"retrievals by {axis}: {key}",
                        len(keyed[key]),
                        keyed[key],
                    )
                )
        for status in ("no_hit", "denied"):
            part = self.groups["status"].get(status, [])
            out.append(
                _figure(
                    f"retrievals.rate.{status}",
                    "retrievals",
                    f"{status} rate",
                    _rate(len(part), len(self.receipts)),
                    part,
                )
            )
        rows = sorted(
            (row for _key, row in sorted(self.sample, key=lambda item: item[0])[:SAMPLE_SIZE]),
            key=lambda r: r["position"],
        )
        out.append(
            _figure(
                "retrievals.sample", "retrievals", "sampled receipts", rows, (r["position"] for r in rows)
            )
        )
        for name in (
            "access.denials",
            "access.content_reads",
            "erasures.erasures",
            "erasures.holds_placed",
            "erasures.holds_released",
            "retention.expiries",
        ):
            out.extend(self.tables[name].figures())
        out.append(
            _figure(
                "retention.rules",
                "retention",
                "retention rules of the documents ingested",
                list(self.rules.values()),
                (r["position"] for r in self.rules.values()),
            )
        )
        out.append(self._oldest_receipt())
        out.append(self._policies())
        out.extend(self.tables["replays.replays"].figures())
        out.append(
            _figure("replays.drift", "replays", "replays whose context changed", len(self.drift), self.drift)
        )
        for name in ("integrity.findings", "integrity.key_rotations", "integrity.reports"):
            out.extend(self.tables[name].figures())
        return out

    def _oldest_receipt(self) -> Figure:
        oldest = self.context.get("oldest_receipt")
        if oldest is None:
            return _figure("retention.oldest_receipt", "retention", "oldest receipt held", None, ())
        age = (self.period.end - parse_timestamp(oldest["recorded_at"])).days
        row = _row(
            oldest,
            receipt_id=oldest["payload"]["receipt_id"],
            age_days=age,
            six_months_held=age >= SIX_MONTHS_DAYS,
        )
        return _figure(
            "retention.oldest_receipt", "retention", "oldest receipt held", row, (oldest["position"],)
        )

    def _policies(self) -> Figure:
        at_start = self.context.get("policy_at_start")
        bundles = ([at_start] if at_start is not None else []) + self.bundles
        rows = []
        for index, e in enumerate(bundles):
            until = bundles[index + 1]["recorded_at"] if index + 1 < len(bundles) else None
            p = e["payload"]
            rows.append(
                _row(
                    e,
                    policy_version=p["policy_version"],
                    bundle_sha256=p["bundle_sha256"],
                    live_from=e["recorded_at"],
                    live_until=until,
                )
            )
        return _figure(
            "policies.in_force", "policies", "policy bundles in force", rows, (r["position"] for r in rows)
        )


def cosigners(note: str, origin: str) -> list[str]:
    """The names on a checkpoint note's signature lines other than the log's own."""
    block = note[note.rfind("\n\n") + 2 :] if "\n\n" in note else ""
    names = [line[2:].partition(" ")[0] for line in block.splitlines() if line.startswith("\u2014 ")]
    return sorted({name for name in names if name != origin})


def checkpoint_figures(checkpoints: Sequence[Mapping[str, Any]], origin: str) -> list[Figure]:
    """Witness coverage: how many of the period's checkpoints each witness cosigned."""
    counts: Counter[str] = Counter()
    for record in checkpoints:
        counts.update(cosigners(str(record["note"]), origin))
    value = {"checkpoints": len(checkpoints), "cosigned_by": dict(sorted(counts.items()))}
    return [
        {
            "id": "integrity.witnesses",
            "section": "integrity",
            "label": "checkpoints and witness cosignatures",
            "value": value,
            "positions": [],
        }
    ]
