"""Verification's reader of a live store, and the writer of whole-log exports.

The export file's format and its offline check live in `ledger/evidence/export_file.py`, which imports
no store (an auditor's machine needs no database driver).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import IO

import orjson

from ledger.domain.entries import utc_now
from ledger.evidence.export_file import EXPORT_FORMAT
from ledger.evidence.verify import LogVerifier, Row, VerifyReport
from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID, Store
from ledger.storage.witnessed import WitnessedSizes
from ledger.tlog.checkpoints import CheckpointRecord, origin_for
from ledger.tlog.cosignature import with_cosignatures
from ledger.tlog.signing import b64

_PAGE = 10_000


def store_checkpoints(store: Store) -> list[CheckpointRecord]:
    rows = store.recorder.select_events(CHECKPOINT_STREAM_ID)
    return [_checkpoint_row(row.originator_version, bytes(row.state)) for row in rows]


def _checkpoint_row(version: int, state: bytes) -> CheckpointRecord:
    try:
        record = CheckpointRecord.from_bytes(state)
    except (ValueError, KeyError, TypeError):
        # An unreadable record still occupies its sequence number; its (empty) note fails later.
        return CheckpointRecord(seq=version, tree_size=0, root=b"", issued_at="", kid="", note="")
    if record.seq != version:
        return CheckpointRecord(seq=version, tree_size=0, root=b"", issued_at="", kid="", note="")
    return record


def _store_rows(store: Store, foreign: list[str]) -> Iterator[Row]:
    """All rows of the events table in commit order; rows of unknown streams go to `foreign`.

    Plain SQL rather than `select_notifications`: verification reads every row,
    and building eventsourcing's Notification objects (UUID parsing included)
    costs more than the rest of the check.
    """
    adapter = store.adapter
    ledger_id, checkpoint_id = adapter.stream_key(LEDGER_STREAM_ID), adapter.stream_key(CHECKPOINT_STREAM_ID)
    after = 0
    while True:
        with store.transaction(commit=False) as cursor:
            page = adapter.log_page(cursor, after, _PAGE)
        for row in page:
            stream = row.stream
            if stream == ledger_id:
                yield Row(row.version, row.state, row.topic)
            elif stream != checkpoint_id:
                foreign.append(f"notification {row.notification_id} of stream {stream}")
        if len(page) < _PAGE:
            return
        after = page[-1].notification_id


def _range_rows(store: Store, first: int, last: int) -> Iterator[Row]:
    cursor = first - 1
    while cursor < last:
        rows = store.recorder.select_events(LEDGER_STREAM_ID, gt=cursor, lte=last, limit=_PAGE)
        if not rows:
            return
        for row in rows:
            yield Row(row.originator_version, bytes(row.state), row.topic)
        cursor = rows[-1].originator_version


def verify_store(
    store: Store,
    trusted_root_key: bytes,
    *,
    deep: bool = False,
    progress: Callable[[int], None] | None = None,
    held: Sequence[str] = (),
) -> VerifyReport:
    checkpoints = store_checkpoints(store)
    foreign: list[str] = []
    verifier = LogVerifier(trusted_root_key, deep=deep, progress=progress)
    return verifier.verify(
        _store_rows(store, foreign),
        checkpoints,
        rescan=lambda first, last: _range_rows(store, first, last),
        foreign=foreign,
        held=held,
    )


def iter_export(store: Store, root_public_key: bytes) -> Iterator[bytes]:
    """The export as JSONL lines (header, checkpoints, entries), for streaming.

    Checkpoints are read first, so every checkpoint in the output is covered
    by entries in the output; entries appended meanwhile come out as pending.
    """
    checkpoints = store_checkpoints(store)
    header = {
        "format": EXPORT_FORMAT,
        "origin": origin_for(root_public_key),
        "root_public_key": b64(root_public_key),
        "exported_at": utc_now(),
    }
    yield orjson.dumps(header) + b"\n"
    cosignatures = WitnessedSizes(store).lines([record.seq for record in checkpoints])
    for record in checkpoints:
        note = with_cosignatures(record.note, cosignatures[record.seq])
        yield orjson.dumps({"checkpoint": {**record.to_json(), "note": note}}) + b"\n"
    for row in _range_rows(store, 1, 2**53 - 1):
        yield row.entry + b"\n"


def write_export(store: Store, out: IO[bytes], root_public_key: bytes) -> tuple[int, int]:
    """Write the log as JSONL; returns (entries, checkpoints) written."""
    entries = checkpoints = 0
    for line in iter_export(store, root_public_key):
        out.write(line)
        if line.startswith(b'{"checkpoint":'):
            checkpoints += 1
        elif not line.startswith(b'{"format":'):
            entries += 1
    return entries, checkpoints
