"""The whole-log export file, read offline: no store, no database driver.

An export is JSONL: a header line, one line per checkpoint, then each entry
exactly as signed (its canonical JSON is the Merkle leaf, byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ledger.evidence.verify import LogVerifier, Row, VerifyReport
from ledger.tlog.checkpoints import CheckpointRecord

EXPORT_FORMAT = "citeledger-export/1"


def _read_export(path: Path) -> tuple[dict[str, Any], list[CheckpointRecord]]:
    checkpoints: list[CheckpointRecord] = []
    with path.open("rb") as handle:
        header = orjson.loads(handle.readline() or b"null")
        if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
            raise ValueError(f"{path}: not a {EXPORT_FORMAT} file")
        for line in handle:
            if not line.startswith(b'{"checkpoint":'):
                break
            checkpoints.append(CheckpointRecord.from_json(orjson.loads(line)["checkpoint"]))
    return header, checkpoints


def _export_rows(path: Path, first: int = 1, last: int | None = None) -> Iterator[Row]:
    with path.open("rb") as handle:
        handle.readline()
        position = 0
        for line in handle:
            if line.startswith(b'{"checkpoint":'):
                continue
            position += 1
            if position < first:
                continue
            if last is not None and position > last:
                return
            yield Row(position, line.rstrip(b"\n"), None)


def verify_export(
    path: Path,
    trusted_root_key: bytes,
    *,
    deep: bool = False,
    progress: Callable[[int], None] | None = None,
    held: Sequence[str] = (),
) -> VerifyReport:
    _, checkpoints = _read_export(path)
    verifier = LogVerifier(trusted_root_key, deep=deep, progress=progress)
    return verifier.verify(
        _export_rows(path),
        checkpoints,
        rescan=lambda first, last: _export_rows(path, first, last),
        held=held,
    )
