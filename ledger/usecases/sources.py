"""Use cases on sources: add, list and remove allowlisted markdown folders, and sync one
into the ledger (`DocumentIngested` for new and changed files, `DocumentRemoved` for
files gone since the last sync). The file rules live in `ledger.retrieval.sources`; the ledger
rules (dedupe by content hash, versions, claims) in `ledger.usecases.documents`.

Log lines name paths, hashes and sizes, never document text.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from ledger.domain.fields import MAX_RETENTION_DAYS
from ledger.domain.path_names import PATH_RULES
from ledger.policy.front_matter import SENSITIVITY_RANK, FileRules, FrontMatterRefused, file_rules
from ledger.retrieval.source_registry import RegistryError, Source, SourceRegistry, valid_name
from ledger.retrieval.sources import (
    BAD_PATH,
    BUILTIN_DENYLIST,
    DENYLISTED,
    SYMLINK_ESCAPE,
    PathRefused,
    ScannedFile,
    SourceLimits,
    check_root,
    denied_by,
    read_markdown,
    scan,
)
from ledger.schemas.field_rules import UNSAFE_PATH
from ledger.schemas.requests import SourceFileIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import BatchOutcome, default_document_id, ingest_batch
from ledger.usecases.errors import Invalid, NotFound

log = logging.getLogger("citeledger.sources")

SOURCE_OVERLAP = "source_overlap"
SYNC_BATCH_DOCUMENTS = 100  # documents per write (one transaction each)
MAX_TITLE_CHARS = 256
_TITLE = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)

Progress = Callable[[int, int], None]  # (files done, files in all)


def _refused(exc: PathRefused) -> Invalid:
    return Invalid(exc.message, code=exc.rule)


def _check_placement(registry: SourceRegistry, root: Path, name: str, *, tell_others: bool) -> None:
    """A root (a real path) may neither hold nor lie inside the ledger's data directory, a
    system folder or another source (of any tenant): a sync would record what is not its own
    (keys, tokens, another tenant's files). At a sync (`tell_others` False) the refusal names
    no other source."""
    data_dir = Path(os.path.realpath(registry.data_dir))
    if denied_by(root, (data_dir,)) or denied_by(data_dir, (root,)):
        raise PathRefused(DENYLISTED, f"{root} holds or lies inside the ledger's data directory")
    system = next((p for p in map(Path, BUILTIN_DENYLIST) if denied_by(p, (root,))), None)
    if system is not None:
        raise PathRefused(DENYLISTED, f"{root} holds the system path {system}")
    for other in registry.all():
        other_root = Path(other.path)
        if other.name != name and (denied_by(root, (other_root,)) or denied_by(other_root, (root,))):
            what = f"source {other.name} ({other_root})" if tell_others else "another source"
            raise PathRefused(SOURCE_OVERLAP, f"{root} holds or lies inside {what}")


def add_source(
    registry: SourceRegistry,
    limits: SourceLimits,
    name: str,
    path: str,
    tenant_id: str,
    *,
    sensitivity: str | None = None,
    retention_days: int | None = None,
) -> dict[str, Any]:
    """Allowlist a folder for a tenant; refused (with the rule) when denylisted or not a folder.
    `sensitivity` / `retention_days`: what every file synced from it gets (front matter may narrow)."""
    if not valid_name(name):
        raise Invalid(f"source name {name!r} must be 1-63 of a-z 0-9 _ - (first a letter or digit)")
    if sensitivity is not None and sensitivity not in SENSITIVITY_RANK:
        raise Invalid("sensitivity must be public, internal or restricted", code="invalid_sensitivity")
    if retention_days is not None and not 1 <= retention_days <= MAX_RETENTION_DAYS:
        raise Invalid(f"retention_days must be from 1 to {MAX_RETENTION_DAYS}", code="invalid_retention")
    try:
        root = check_root(path, limits)
        _check_placement(registry, root, name, tell_others=True)
        registry.add(
            Source(
                name=name,
                path=str(root),
                tenant_id=tenant_id,
                sensitivity=sensitivity,
                retention_days=retention_days,
            )
        )
    except PathRefused as exc:
        raise _refused(exc) from None
    except RegistryError as exc:
        raise Invalid(str(exc), code="source_exists") from None
    log.info("source added name=%s tenant=%s path=%s", name, tenant_id, root)
    rules = {"sensitivity": sensitivity, "retention_days": retention_days}
    return {"name": name, "path": str(root), "tenant_id": tenant_id} | {
        key: value for key, value in rules.items() if value is not None
    }


def list_sources(registry: SourceRegistry, tenant_id: str | None = None) -> list[dict[str, Any]]:
    return [s.__dict__ for s in registry.all() if tenant_id is None or s.tenant_id == tenant_id]


def remove_source(registry: SourceRegistry, name: str) -> dict[str, Any]:
    """Take a folder off the allowlist (its documents stay in the ledger as recorded)."""
    if not registry.remove(name):
        raise NotFound("source")
    log.info("source removed name=%s", name)
    return {"name": name, "removed": True}


def _title(text: str) -> str | None:
    match = _TITLE.search(text)
    return match.group(1)[:MAX_TITLE_CHARS] if match else None


def _row(file: ScannedFile, status: str, reason: str | None = None, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"path": file.path, "status": status}
    if reason is not None:
        row["reason"] = reason
    if file.sha256 is not None:
        row["sha256"] = file.sha256
        row["bytes"] = file.size
    return {**row, **{k: v for k, v in extra.items() if v is not None}}


def _outcome_row(file: ScannedFile, outcome: BatchOutcome) -> dict[str, Any]:
    if outcome.status == "refused":
        return _row(file, "skipped", outcome.code, document_id=outcome.document_id)
    return _row(
        file,
        outcome.status,
        document_id=outcome.document_id,
        version=outcome.version,
        position=outcome.position,
    )


def sync_source(
    ctx: UseCaseContext,
    claims: DocumentClaims,
    registry: SourceRegistry,
    limits: SourceLimits,
    caller: Caller,
    name: str,
    *,
    under: str | None = None,
    time_budget_s: float | None = None,
    progress: Progress | None = None,
    readmit: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Bring the ledger in line with the folder: every markdown file is reported
    `ingested | unchanged | removed | skipped` (with its reason), in path order. A bad file
    never fails the batch. When the scan could not see everything (`truncated`), nothing is
    removed: a file it did not reach is not a file that vanished.

    An erasure sticks: a file whose document was erased, or whose content is that of an erased
    version (by SHA-256: a copy or a move), is `skipped (erased)` until the operator names its
    path in `readmit`; it is then recorded as a new document (`<id>.readmit.<n>`): the erased
    one's key is gone for good."""
    tenant = caller.tenant_id
    source = registry.get(name, tenant)
    if source is None:
        raise NotFound("source")
    started = time.monotonic()
    budget = limits.scan_timeout_s if time_budget_s is None else min(limits.scan_timeout_s, time_budget_s)
    try:
        root = check_root(source.path, limits)
        if root != Path(source.path):  # the folder became a link to somewhere else
            raise PathRefused(SYMLINK_ESCAPE, f"source {name} now resolves outside its recorded root")
        _check_placement(registry, root, name, tell_others=False)  # a registry written before the rule
        scanned = scan(root, replace(limits, scan_timeout_s=budget), under=under)
    except PathRefused as exc:
        log.warning("source sync refused name=%s tenant=%s rule=%s", name, tenant, exc.rule)
        raise _refused(exc) from None
    truncated = scanned.truncated
    rows: dict[str, dict[str, Any]] = {}
    readable: list[Prepared] = []
    default_days = ctx.retention_for(tenant).default_days
    usable = [f for f in scanned.files if f.text is not None or f.deferred is not None]
    targets = _targets(ctx, tenant, name, usable, readmit)
    large: list[ScannedFile] = []  # read and recorded one at a time, after the others
    for file in scanned.files:
        if file.deferred is not None and file.path in targets:
            large.append(file)
            continue
        prepared = _prepared(file, targets, source, default_days, name)
        if isinstance(prepared, dict):
            rows[file.path] = prepared
        else:
            readable.append(prepared)
    total = len(scanned.files)
    done = total - len(readable) - len(large)
    if progress is not None:
        progress(done, total)
    for start in range(0, len(readable), SYNC_BATCH_DOCUMENTS):
        batch = readable[start : start + SYNC_BATCH_DOCUMENTS]
        if time.monotonic() - started > budget:
            truncated = "deadline"
            for file, _, _ in readable[start:]:
                rows[file.path] = _row(file, "skipped", "deadline")
            break
        _record(ctx, claims, caller, batch, rows)
        done += len(batch)
        if progress is not None:
            progress(done, total)
    for file in large:
        if truncated == "deadline" or time.monotonic() - started > budget:
            truncated = "deadline"
            rows[file.path] = _row(file, "skipped", "deadline")
            continue
        prepared = _prepared(_read_large(file, limits), targets, source, default_days, name)
        if isinstance(prepared, dict):
            rows[file.path] = prepared
        else:
            _record(ctx, claims, caller, [prepared], rows)
        done += 1
        if progress is not None:
            progress(done, total)
    if truncated is None:
        vanished = _vanished(ctx, tenant, name, scanned.prefix, set(rows))
        for start in range(0, len(vanished), SYNC_BATCH_DOCUMENTS):
            batch_gone = vanished[start : start + SYNC_BATCH_DOCUMENTS]
            outcomes = ingest_batch(ctx, claims, caller, [], [document_id for _, document_id in batch_gone])
            for (path, document_id), outcome in zip(batch_gone, outcomes, strict=True):
                rows[path] = {"path": path, "status": outcome.status, "document_id": document_id}
                if outcome.position is not None:
                    rows[path]["position"] = outcome.position
    report = [rows[path] for path in sorted(rows)]
    for row in report:
        # What an audit needs (path, hash, size, outcome), never the text.
        log.info(
            "source sync name=%s tenant=%s path=%s status=%s reason=%s sha256=%s bytes=%s",
            name,
            tenant,
            row["path"],
            row["status"],
            row.get("reason", "-"),
            row.get("sha256", "-"),
            row.get("bytes", "-"),
        )
    totals = Counter(row["status"] for row in report)
    return {
        "source": name,
        "files": report,
        "totals": {
            "ingested": totals["ingested"],
            "unchanged": totals["unchanged"],
            "removed": totals["removed"],
            "skipped": totals["skipped"],
            "ignored": scanned.ignored,
        },
        "truncated": truncated,
    }


Prepared = tuple[ScannedFile, SourceFileIn, FileRules]


def _prepared(
    file: ScannedFile, targets: dict[str, str], source: Source, default_days: int, name: str
) -> Prepared | dict[str, Any]:
    """A readable file as the document to record, or its report row (skipped, and why)."""
    if file.text is None:
        return _row(file, "skipped", file.skip)
    document_id = targets.get(file.path)
    if document_id is None:
        return _row(file, "skipped", "erased", detail=READMIT_HINT)
    try:
        rules = file_rules(file.text, source.sensitivity, source.retention_days, default_days)
    except FrontMatterRefused as exc:
        return _row(file, "skipped", exc.reason, detail=exc.message)
    try:
        doc = SourceFileIn(
            path=file.path,
            text=file.text,
            title=_title(file.text),
            source=name,
            document_id=document_id,
            sensitivity=rules.sensitivity,  # type: ignore[arg-type]
            retention_days=rules.retention_days,
        )
    except ValidationError as exc:
        # A file name no document path may be (`a\\b.md`): the scanner's own reason for it.
        types = [str(error["type"]) for error in exc.errors()]
        named = next((t for t in types if t in PATH_RULES), None)  # the scanner's rules, as a backstop
        reason = BAD_PATH if UNSAFE_PATH in types else named or "invalid_document"
        return _row(file, "skipped", reason)
    return file, doc, rules


def _read_large(file: ScannedFile, limits: SourceLimits) -> ScannedFile:
    """A file the scan deferred, read now (checked again: it may have changed since)."""
    assert file.deferred is not None
    read = read_markdown(Path(file.deferred), file.path, limits)
    return replace(read, spelled=file.spelled)


def _record(
    ctx: UseCaseContext,
    claims: DocumentClaims,
    caller: Caller,
    batch: list[Prepared],
    rows: dict[str, dict[str, Any]],
) -> None:
    """One write of prepared files; their report rows."""
    outcomes = ingest_batch(
        ctx,
        claims,
        caller,
        [doc for _, doc, _ in batch],
        origins=[(rules.sensitivity_origin, rules.retention_origin) for _, _, rules in batch],
    )
    for (file, _, rules), outcome in zip(batch, outcomes, strict=True):
        rows[file.path] = _outcome_row(file, outcome)
        if outcome.status in ("ingested", "unchanged"):
            rows[file.path].update(
                sensitivity=rules.sensitivity,
                sensitivity_origin=rules.sensitivity_origin,
                retention_days=rules.retention_days,
                retention_origin=rules.retention_origin,
            )


READMIT_HINT = "erased from the ledger; `citeledger sources sync NAME --readmit PATH` records it again"
READMIT_MARK = ".readmit."


def _targets(
    ctx: UseCaseContext, tenant: str, name: str, files: list[ScannedFile], readmit: frozenset[str]
) -> dict[str, str]:
    """The document each readable file is recorded as; erased files are left out (skipped)
    unless re-admitted. What recognises them is no text: the erased document ids and the
    content SHA-256 their versions were recorded with."""
    ctx.lookups.refresh()
    erased_ids, erased_hashes = ctx.lookups.erased_documents(tenant)
    live = ctx.lookups.source_documents(tenant, name)  # path -> document id (a re-admitted one too)
    current = ctx.lookups.documents(tenant, [live[f.path] for f in files if f.path in live])
    targets: dict[str, str] = {}
    for file in files:
        document_id = live.get(file.path) or default_document_id(tenant, name, file.path)
        state = current.get(document_id)
        known = state is not None and state.content_sha256 == file.sha256 and document_id not in erased_ids
        if document_id in erased_ids or (file.sha256 in erased_hashes and not known):
            if file.path not in readmit:
                continue
            if document_id in erased_ids:
                base = default_document_id(tenant, name, file.path)
                taken = sum(1 for i in erased_ids if i.startswith(base + READMIT_MARK))
                document_id = f"{base}{READMIT_MARK}{taken + 1}"
            log.info("source sync readmitted name=%s tenant=%s path=%s", name, tenant, file.path)
        targets[file.path] = document_id
    return targets


def _vanished(
    ctx: UseCaseContext, tenant: str, name: str, under: str | None, seen: set[str]
) -> list[tuple[str, str]]:
    """Documents this source recorded (their id is the source's own id for the path) whose
    file the scan did not see; with `under` (relative to the root), only those below it."""
    ctx.lookups.refresh()
    prefix = PurePosixPath(under) if under else None
    gone = []
    for path, document_id in sorted(ctx.lookups.source_documents(tenant, name).items()):
        own = default_document_id(tenant, name, path)
        if (document_id != own and not document_id.startswith(own + READMIT_MARK)) or path in seen:
            continue
        if prefix is not None and prefix not in PurePosixPath(path).parents:
            continue
        gone.append((path, document_id))
    return gone
