"""Use cases on sources: add, list and remove allowlisted markdown folders, and sync one
into the ledger (`DocumentIngested` for new and changed files, `DocumentRemoved` for
files gone since the last sync). The file rules live in `ledger.sources`; the ledger
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

from ledger.claims import DocumentClaims
from ledger.source_registry import RegistryError, Source, SourceRegistry, valid_name
from ledger.sources import (
    BAD_PATH,
    BUILTIN_DENYLIST,
    DENYLISTED,
    SYMLINK_ESCAPE,
    PathRefused,
    ScannedFile,
    SourceLimits,
    check_root,
    denied_by,
    scan,
)
from ledger.usecases.commands import UNSAFE_PATH, DocumentIn
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
    registry: SourceRegistry, limits: SourceLimits, name: str, path: str, tenant_id: str
) -> dict[str, Any]:
    """Allowlist a folder for a tenant; refused (with the rule) when denylisted or not a folder."""
    if not valid_name(name):
        raise Invalid(f"source name {name!r} must be 1-63 of a-z 0-9 _ - (first a letter or digit)")
    try:
        root = check_root(path, limits)
        _check_placement(registry, root, name, tell_others=True)
        registry.add(Source(name=name, path=str(root), tenant_id=tenant_id))
    except PathRefused as exc:
        raise _refused(exc) from None
    except RegistryError as exc:
        raise Invalid(str(exc), code="source_exists") from None
    log.info("source added name=%s tenant=%s path=%s", name, tenant_id, root)
    return {"name": name, "path": str(root), "tenant_id": tenant_id}


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
) -> dict[str, Any]:
    """Bring the ledger in line with the folder: every markdown file is reported
    `ingested | unchanged | removed | skipped` (with its reason), in path order. A bad file
    never fails the batch. When the scan could not see everything (`truncated`), nothing is
    removed: a file it did not reach is not a file that vanished."""
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
    readable: list[tuple[ScannedFile, DocumentIn]] = []
    for file in scanned.files:
        if file.text is None:
            rows[file.path] = _row(file, "skipped", file.skip)
            continue
        try:
            doc = DocumentIn(path=file.path, text=file.text, title=_title(file.text), source=name)
        except ValidationError as exc:
            # A file name no document path may be (`a\\b.md`): the scanner's own reason for it.
            unsafe = any(error["type"] == UNSAFE_PATH for error in exc.errors())
            rows[file.path] = _row(file, "skipped", BAD_PATH if unsafe else "invalid_document")
            continue
        readable.append((file, doc))
    total = len(scanned.files)
    done = total - len(readable)
    if progress is not None:
        progress(done, total)
    for start in range(0, len(readable), SYNC_BATCH_DOCUMENTS):
        batch = readable[start : start + SYNC_BATCH_DOCUMENTS]
        if time.monotonic() - started > budget:
            truncated = "deadline"
            for file, _ in readable[start:]:
                rows[file.path] = _row(file, "skipped", "deadline")
            break
        outcomes = ingest_batch(ctx, claims, caller, [doc for _, doc in batch])
        for (file, _), outcome in zip(batch, outcomes, strict=True):
            rows[file.path] = _outcome_row(file, outcome)
        done += len(batch)
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


def _vanished(
    ctx: UseCaseContext, tenant: str, name: str, under: str | None, seen: set[str]
) -> list[tuple[str, str]]:
    """Documents this source recorded (their id is the source's own id for the path) whose
    file the scan did not see; with `under` (relative to the root), only those below it."""
    ctx.lookups.refresh()
    prefix = PurePosixPath(under) if under else None
    gone = []
    for path, document_id in sorted(ctx.lookups.source_documents(tenant, name).items()):
        if document_id != default_document_id(tenant, name, path) or path in seen:
            continue
        if prefix is not None and prefix not in PurePosixPath(path).parents:
            continue
        gone.append((path, document_id))
    return gone
