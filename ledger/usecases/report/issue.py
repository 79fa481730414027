"""Issuing a report: the period's checkpoints, one pass over the log, the evidence, the signed entry.

The period [from, to) is bounded by two signed checkpoints: the newest issued at or before
`from` (its entries were all recorded before the period; none: the empty tree) and the first
issued at or after `to` (one is issued now when none is yet). Every leaf hash between them is
kept, so the checker recomputes both roots: no position of the range is missing. The
tenant's entries recorded in the period (and the ledger's own key and repair entries) are
counted and kept verbatim; every entry a table names is proven by inclusion.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ledger.deadline import Deadline
from ledger.domain.entries import SYSTEM_TENANT
from ledger.domain.events import ReportIssued
from ledger.domain.timestamps import format_timestamp, parse_timestamp
from ledger.evidence import report_files as files
from ledger.evidence.bundle import build_bundle, proof_json
from ledger.evidence.report_figures import (
    LEDGER_TYPES,
    REPORT_FORMAT,
    FigureBuilder,
    Period,
    checkpoint_figures,
)
from ledger.tlog.checkpoints import CheckpointRecord
from ledger.tlog.merkle import leaf_hash
from ledger.tlog.signing import b64
from ledger.usecases.content import read_content
from ledger.usecases.context import Caller, UseCaseContext, record
from ledger.usecases.errors import AccessDenied, Invalid, TooLarge
from ledger.usecases.report.html import render_html
from ledger.usecases.report.mapping import MAPPING, NOT_SHOWN
from ledger.usecases.report.pdf import PDF_TIMEOUT_S, render_pdf
from ledger.usecases.scopes import CONTENT_SCOPE
from ledger.writing.writes import LedgerIntegrityError

AUDIT_SCOPE = "audit.read"
MAX_PERIOD_DAYS = 366  # a year: a quarter is what is asked for
MAX_REPORT_ENTRIES = 2_000_000  # entries counted in one report
MAX_CITED = 5_000  # entries proven one by one (the tables are capped below this)
_RECEIPT_MARK = b'"type":"RetrievalRecorded"'
_POLICY_MARK = b'"type":"PolicyBundlePublished"'


@dataclass(frozen=True)
class ReportOutcome:
    report_id: str
    out_dir: Path
    manifest_sha256: str
    entries: int
    position: int  # of the ReportIssued entry
    pdf: bool


def report_period(period_from: str, period_to: str, *, now: datetime) -> Period:
    """The period [from, to) from timestamps or dates (`2026-07-01`: its midnight UTC);
    Invalid naming the field when it is not a period the report can cover."""
    bounds = []
    for name, value in (("from", period_from), ("to", period_to)):
        text = value + "T00:00:00Z" if len(value) == 10 else value
        try:
            bounds.append(parse_timestamp(text))
        except ValueError:
            raise Invalid(f"{name}: {value[:40]!r} is not a date (YYYY-MM-DD) or a UTC timestamp") from None
    start, end = bounds
    if end <= start:
        raise Invalid("to: the period ends before it starts")
    if end - start > timedelta(days=MAX_PERIOD_DAYS):
        raise Invalid(f"to: a report covers at most {MAX_PERIOD_DAYS} days")
    if start > now:
        raise Invalid("from: the period starts in the future")
    return Period(start, end)


def _checkpoints(ledger: Any, period: Period) -> tuple[CheckpointRecord | None, CheckpointRecord]:
    records = ledger.checkpoints()
    before = [r for r in records if parse_timestamp(r.issued_at) <= period.start]
    after = [r for r in records if parse_timestamp(r.issued_at) >= period.end]
    end = after[0] if after else ledger.issue_checkpoint()
    if end is None:
        raise Invalid("the log is empty")
    if ledger.cosigner is not None and not ledger.witnessed.lines([end.seq])[end.seq]:
        # Witnesses cosign only forward: the newest checkpoint, asked now, ends the range instead.
        newest = ledger.issue_checkpoint()
        end = ledger.cosign(newest if newest is not None else end)
    return (before[-1] if before else None), end


class _Scan:
    """One pass over the log's raw rows: the context before the period, then the range's leaves
    and entries. Only the tenant's entries (and the ledger's own) are parsed, each once, and
    none is kept: a million entries pass through in constant memory."""

    def __init__(
        self, tenant: str, period: Period, builder: FigureBuilder, max_entries: int, deadline: Deadline | None
    ) -> None:
        self.tenant, self.period, self.builder, self.max_entries = tenant, period, builder, max_entries
        self.deadline = deadline
        # Canonical JSON writes a top-level member as `"name":"value"`, quotes unescaped, which no
        # string's bytes can hold: these find every candidate, the parsed envelope decides.
        self.tenant_mark = b'"tenant_id":"' + tenant.encode() + b'"'
        self.ledger_mark = b'"tenant_id":"' + SYSTEM_TENANT.encode() + b'"'
        self.oldest_receipt: dict[str, Any] | None = None
        self.policy_at_start: dict[str, Any] | None = None
        self.counted = 0
        self.pending = bytearray()
        self.read_to = 0

    def _context(self, envelope: dict[str, Any], recorded: datetime | None = None) -> None:
        """The two entries before the period a figure names."""
        if envelope["tenant_id"] != self.tenant:
            return
        kind = envelope["type"]
        if kind == "RetrievalRecorded" and self.oldest_receipt is None:
            self.oldest_receipt = envelope
        elif kind == "PolicyBundlePublished":
            moment = recorded if recorded is not None else parse_timestamp(envelope["recorded_at"])
            if moment < self.period.start:
                self.policy_at_start = envelope

    def prefix(self, pages: Iterator[list[tuple[int, bytes]]]) -> None:
        for page in pages:
            for _position, entry in page:
                if self.tenant_mark not in entry:
                    continue
                if (self.oldest_receipt is None and _RECEIPT_MARK in entry) or _POLICY_MARK in entry:
                    self._context(orjson.loads(entry))

    def range(
        self, pages: Iterator[list[tuple[int, bytes]]], first: int, leaves: BinaryIO, entries: BinaryIO
    ) -> None:
        """Every leaf hash of positions `first`.. to `leaves`, the counted entries to `entries`,
        a page at a time (the compressor's worker thread takes a block at a time)."""
        expected = first
        for page in pages:
            if self.deadline is not None:
                self.deadline.check()  # a request's report stops when its answer is no longer awaited
            hashes = bytearray()
            for position, entry in page:
                if position != expected:
                    raise LedgerIntegrityError(f"position {expected}: missing from the store")
                expected += 1
                hashes += leaf_hash(entry)
                if self.tenant_mark in entry or self.ledger_mark in entry:
                    self._entry(entry)
            leaves.write(hashes)
            entries.write(self.pending)
            self.pending.clear()
        self.read_to = expected - 1

    def _entry(self, entry: bytes) -> None:
        envelope = orjson.loads(entry)
        owner, kind = envelope["tenant_id"], envelope["type"]
        if owner != self.tenant and not (owner == SYSTEM_TENANT and kind in LEDGER_TYPES):
            return
        recorded = parse_timestamp(envelope["recorded_at"])
        self._context(envelope, recorded)
        if not self.period.start <= recorded < self.period.end:
            return
        self.counted += 1
        if self.counted > self.max_entries:
            raise TooLarge(
                f"to: the period holds more than {self.max_entries} entries of the tenant; "
                "report a shorter period"
            )
        self.builder.add(envelope)
        self.pending += entry
        self.pending += b"\n"


def _named_positions(figures: list[dict[str, Any]]) -> list[int]:
    """The entries the tables and single facts name: each is proven by inclusion on its own."""
    named: set[int] = set()
    for figure in figures:
        value = figure["value"]
        rows = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
        named.update(row["position"] for row in rows if isinstance(row, dict) and "position" in row)
    return sorted(named)[:MAX_CITED]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_json(path: Path, value: Any) -> None:
    path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


def _questions(ctx: UseCaseContext, caller: Caller, sample: list[dict[str, Any]]) -> dict[str, Any]:
    """The sampled receipts' questions in plain, for a holder of `audit.content` only (the read
    recorded as a ContentRead like every other); erased or expired ones say so."""
    if CONTENT_SCOPE not in caller.scopes or not sample:
        return {}
    found = (ctx.ledger.get(row["position"]) for row in sample)
    events = [event for event in found if event is not None]
    contents = read_content(ctx, caller, events)
    return {
        str(event.payload["receipt_id"]): contents[event.position].get("query")
        for event in events
        if event.position in contents
    }


def issue_report(
    ctx: UseCaseContext,
    caller: Caller,
    period: Period,
    out_dir: Path,
    *,
    max_entries: int = MAX_REPORT_ENTRIES,
    pdf: bool = True,
) -> ReportOutcome:
    """Write the report of `caller`'s tenant for `period` into `out_dir` (new or empty) and
    append its manifest's hash as a signed `ReportIssued` entry."""
    if AUDIT_SCOPE not in caller.scopes:
        raise AccessDenied(f"a report requires the {AUDIT_SCOPE} scope", reason="audit_scope_required")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise Invalid(f"out: {out_dir} is not empty")
    (out_dir / files.EVIDENCE).mkdir(parents=True, exist_ok=True)
    try:
        return _issue(ctx, caller, period, out_dir, max_entries, pdf)
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)  # nothing half written is left as a report
        raise


def _issue(
    ctx: UseCaseContext, caller: Caller, period: Period, out: Path, max_entries: int, pdf: bool
) -> ReportOutcome:
    ledger = ctx.ledger
    start, end = _checkpoints(ledger, period)
    start_size = start.tree_size if start else 0
    seed = f"{end.root.hex()}/{caller.tenant_id}"
    builder = FigureBuilder(tenant_id=caller.tenant_id, period=period, seed=seed, context={})
    scan = _Scan(caller.tenant_id, period, builder, max_entries, caller.deadline)
    # The store's pages are read ahead on a worker thread while this one parses.
    scan.prefix(files.read_ahead(ledger.read_pages(1, start_size), depth=2) if start_size else iter(()))
    with ExitStack() as stack:
        leaves = stack.enter_context((out / files.LEAVES).open("wb"))
        entries = stack.enter_context(
            files.entries_writer(stack.enter_context((out / files.ENTRIES).open("wb")))
        )
        pages = files.read_ahead(ledger.read_pages(start_size + 1, end.tree_size), depth=2)
        scan.range(pages, start_size + 1, leaves, entries)
    if scan.read_to != end.tree_size:
        raise LedgerIntegrityError(f"position {scan.read_to + 1}: missing from the store")
    builder.context = {"oldest_receipt": scan.oldest_receipt, "policy_at_start": scan.policy_at_start}
    seqs = list(range(start.seq if start else 1, end.seq + 1))
    lines = ledger.witnessed.lines(seqs) if seqs else {}
    by_seq = {record.seq: record for record in ledger.checkpoints() if record.seq in lines}
    cosigned = [
        by_seq[seq].to_json() | {"note": by_seq[seq].note + "".join(lines[seq])}
        for seq in seqs
        if seq in by_seq
    ]
    figures = builder.figures() + checkpoint_figures(cosigned, ledger.origin)
    _write_evidence(ledger, out, start, end, cosigned, _named_positions(figures))
    report_id = uuid.uuid4().hex
    manifest: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "report_id": report_id,
        "tenant_id": caller.tenant_id,
        "origin": ledger.origin,
        "root_public_key": b64(ledger.root_public_key),
        "generated_at": format_timestamp(ctx.clock()),
        "generated_by": caller.actor,
        "period": {"from": format_timestamp(period.start), "to": format_timestamp(period.end)},
        "range": {
            "start_size": start_size,
            "end_size": end.tree_size,
            "start_seq": start.seq if start else None,
            "end_seq": end.seq,
        },
        "sample_seed": seed,
        "evidence": {name: _sha256_file(out / name) for name in files.LISTED if (out / name).exists()},
        "figures": figures,
        "questions": _questions(
            ctx, caller, next(f["value"] for f in figures if f["id"] == "retrievals.sample")
        ),
        "mapping": list(MAPPING),
        "not_shown": list(NOT_SHOWN),
    }
    _write_json(out / files.MANIFEST, manifest)
    digest = _sha256_file(out / files.MANIFEST)
    (out / files.HTML).write_text(render_html(manifest, digest), encoding="utf-8")
    # A request's deadline bounds the PDF too: without one in time, the HTML is the report.
    budget = caller.deadline.remaining() - 2 if caller.deadline is not None else PDF_TIMEOUT_S
    rendered = pdf and render_pdf(out / files.HTML, out / files.PDF, min(budget, PDF_TIMEOUT_S))
    payload = ReportIssued(
        report_id=report_id,
        period_from=manifest["period"]["from"],
        period_to=manifest["period"]["to"],
        start_size=start_size,
        end_size=end.tree_size,
        manifest_sha256=digest,
    )
    position = record(ctx, caller, [payload], lambda events: {"position": events[0].position}).body[
        "position"
    ]
    _write_json(out / files.ISSUED, build_bundle(ledger, position))
    return ReportOutcome(report_id, out, digest, scan.counted, position, rendered)


def _write_evidence(
    ledger: Any,
    out: Path,
    start: CheckpointRecord | None,
    end: CheckpointRecord,
    cosigned: list[dict[str, Any]],
    cited: list[int],
) -> None:
    size = end.tree_size
    start_size = start.tree_size if start else 0
    if start is not None:
        _write_json(out / files.START_CHECKPOINT, ledger.cosigned(start).to_json())
    _write_json(out / files.END_CHECKPOINT, ledger.cosigned(end).to_json())
    with (out / files.PERIOD_CHECKPOINTS).open("wb") as handle:
        for item in cosigned:
            handle.write(orjson.dumps(item, option=orjson.OPT_SORT_KEYS) + b"\n")
    hashes = ledger.consistency_proof(start_size, size) if start_size else []
    _write_json(
        out / files.CONSISTENCY,
        {"old_size": start_size, "new_size": size, "hashes": [h.hex() for h in hashes]},
    )
    _write_json(out / files.FRONTIER, files.frontier_json(ledger.tree.frontier(start_size)))
    with (out / files.KEY_CHAIN).open("wb") as handle:
        for event in ledger.key_events(up_to=size):
            proof = proof_json(event.position, size, ledger.inclusion_proof(event.position, size))
            handle.write(files.proven_line(proof, event.entry))
    with (out / files.CITED).open("wb") as handle:
        for position in cited:
            event = ledger.get(position)
            if event is not None:
                proof = proof_json(position, size, ledger.inclusion_proof(position, size))
                handle.write(files.proven_line(proof, event.entry))
