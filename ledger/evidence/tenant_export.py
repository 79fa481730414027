"""A tenant's export: only its entries, each with an inclusion proof, checkable offline.

NDJSON, one line each, in this order:
- a header: format, origin, root public key, the tenant, when;
- one signed checkpoint covering every entry below (issued on demand);
- the key chain (every `SigningKeyRotated` entry of `_ledger` up to the checkpoint),
  `{"kind":"key","proof":{...},"entry":<the entry's exact signed bytes>}`;
- the tenant's entries in position order, `{"kind":"entry","proof":{...},"entry":<bytes>}`;
- a trailer with the counts, so a cut-off file is told apart from a short one.

The entry comes last on its line, verbatim: its bytes are the Merkle leaf, so a
changed byte (even whitespace) fails its proof. A partial export proves that each
listed entry is signed and part of the log the checkpoint signed; it cannot prove
that the tenant has no other entries, and `verify_tenant_export` says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ledger.domain.entries import SYSTEM_TENANT, entry_signature_ok
from ledger.domain.keychain import KeyChainError, check_key_event, kid_in_force
from ledger.domain.timestamps import utc_now
from ledger.evidence.bundle import BundleError, check_inclusion, proof_json
from ledger.evidence.verify import Finding, FindingsReport
from ledger.tlog.checkpoints import CheckpointRecord, open_record, origin_for
from ledger.tlog.note import NoteError
from ledger.tlog.signing import b64

TENANT_EXPORT_FORMAT = "citeledger-tenant-export/1"
_ENTRY_MEMBER = b',"entry":'
_MAX_LINE_BYTES = 4 * 1024 * 1024  # an entry is at most 1 MiB; its proof at most 64 hashes


def _line(kind: str, position: int, size: int, hashes: list[bytes], entry: bytes) -> bytes:
    head = orjson.dumps({"kind": kind, "proof": proof_json(position, size, hashes)})
    return head[:-1] + _ENTRY_MEMBER + entry + b"}\n"


def iter_tenant_export(ledger: Any, tenant_id: str) -> Iterator[bytes]:
    """The tenant's export as NDJSON lines, for streaming (one page of the log in memory).

    The checkpoint is the newest one if it covers the whole log, else one issued now;
    entries appended after it are left out (they belong to the next export)."""
    checkpoint: CheckpointRecord | None = ledger.issue_checkpoint()
    if checkpoint is not None:
        checkpoint = ledger.cosign(checkpoint)  # with its witnesses' cosignatures
    if checkpoint is None:  # never: the genesis entry is written when a ledger opens
        raise LookupError("the log is empty")
    size = checkpoint.tree_size
    header = {
        "format": TENANT_EXPORT_FORMAT,
        "scope": "tenant",
        "tenant_id": tenant_id,
        "origin": ledger.origin,
        "root_public_key": b64(ledger.root_public_key),
        "exported_at": utc_now(),
    }
    yield orjson.dumps(header) + b"\n"
    yield orjson.dumps({"checkpoint": checkpoint.to_json()}) + b"\n"
    keys = ledger.key_events(up_to=size)
    for event in keys:
        yield _line("key", event.position, size, ledger.inclusion_proof(event.position, size), event.entry)
    entries = 0
    for event in ledger.read(1, size):
        if event.tenant_id != tenant_id:
            continue
        entries += 1
        yield _line("entry", event.position, size, ledger.inclusion_proof(event.position, size), event.entry)
    yield orjson.dumps({"end": {"entries": entries, "key_entries": len(keys)}}) + b"\n"


# -- offline verification -----------------------------------------------------------------


@dataclass
class TenantExportReport(FindingsReport):
    tenant_id: str = ""
    entries: int = 0  # the tenant's entries read, each signature and proof checked
    first_position: int | None = None
    last_position: int | None = None
    key_entries: int = 0
    checkpoint: CheckpointRecord | None = None


class _Bad(Exception):
    def __init__(self, position: int | None, problem: str, seq: int | None = None) -> None:
        self.finding = Finding(position, problem, seq)


def is_tenant_export(path: Path) -> bool:
    with path.open("rb") as handle:
        first = handle.readline(_MAX_LINE_BYTES)
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return isinstance(header, dict) and header.get("format") == TENANT_EXPORT_FORMAT


def _split(line: bytes, number: int) -> tuple[str, dict[str, Any], bytes, dict[str, Any]]:
    """(kind, proof, the entry's exact bytes, the parsed entry) of a proven line."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise _Bad(None, f"line {number} is not JSON (bytes changed)") from None
    at = line.find(_ENTRY_MEMBER)
    if (
        not isinstance(value, dict)
        or at < 0
        or not line.endswith(b"}")
        or not isinstance(value.get("entry"), dict)
    ):
        raise _Bad(None, f"line {number} is not an export line")
    entry = line[at + len(_ENTRY_MEMBER) : -1]
    envelope = value["entry"]
    if not isinstance(envelope.get("position"), int) or isinstance(envelope.get("position"), bool):
        raise _Bad(None, f"line {number}: entry has no position")
    return str(value.get("kind")), value.get("proof") or {}, entry, envelope


class _Verifier:
    def __init__(self, trusted_root_key: bytes, report: TenantExportReport) -> None:
        self.root_key = trusted_root_key
        self.origin = origin_for(trusted_root_key)
        self.report = report
        self.keys: dict[str, bytes] = {}
        self.key_positions: list[tuple[int, str]] = []  # (position introduced, kid), ascending
        self.key_lines: list[tuple[bytes, int, dict[str, Any]]] = []  # a handful: one per rotation
        self.checkpoint: CheckpointRecord | None = None
        self.checkpoint_checked = False
        self.last_position = 0

    def header(self, line: bytes) -> None:
        try:
            header = orjson.loads(line)
        except orjson.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or header.get("format") != TENANT_EXPORT_FORMAT:
            raise _Bad(None, f"not a {TENANT_EXPORT_FORMAT} file")
        tenant = header.get("tenant_id")
        if not isinstance(tenant, str) or not tenant or tenant == SYSTEM_TENANT:
            raise _Bad(None, "header names no tenant")
        self.report.tenant_id = tenant

    def checkpoint_line(self, line: bytes) -> None:
        try:
            self.checkpoint = CheckpointRecord.from_json(orjson.loads(line)["checkpoint"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise _Bad(None, "checkpoint line missing or malformed") from None
        self.report.checkpoint = self.checkpoint

    def _proven(self, entry: bytes, position: int, proof: dict[str, Any], what: str) -> bool:
        record = self.checkpoint
        assert record is not None
        try:
            check_inclusion(entry, position, proof, record.root, record.tree_size, what)
        except BundleError:
            return False
        return True

    def key_line(self, entry: bytes, envelope: dict[str, Any], proof: dict[str, Any]) -> None:
        record = self.checkpoint
        assert record is not None
        position = envelope["position"]
        if envelope.get("tenant_id") != SYSTEM_TENANT or position <= (self.key_positions or [(0, "")])[-1][0]:
            raise _Bad(position, "key chain entry out of order or not the ledger's")
        if position > record.tree_size:
            raise _Bad(position, f"key chain entry beyond the checkpoint's {record.tree_size} entries")
        current = self.key_positions[-1][1] if self.key_positions else None
        try:
            kid, public_raw = check_key_event(envelope, position, self.keys, current, self.root_key)
        except KeyChainError as exc:
            raise _Bad(exc.position, f"key chain: {exc.problem}") from None
        self.keys[kid] = public_raw
        self.key_positions.append((position, kid))
        self.key_lines.append((entry, position, proof))  # proven once the checkpoint is opened
        self.report.key_entries += 1

    def open_checkpoint(self) -> None:
        """The checkpoint's signature, once the key chain is known."""
        record = self.checkpoint
        assert record is not None
        if not self.key_positions or self.key_positions[0][0] != 1:
            raise _Bad(1, "key chain does not start at the genesis entry")
        try:
            open_record(record, self.origin, self.keys)
        except (NoteError, ValueError) as exc:
            raise _Bad(record.tree_size, f"checkpoint signature invalid: {exc}", record.seq) from None
        for entry, position, proof in self.key_lines:
            if not self._proven(entry, position, proof, "key"):
                raise _Bad(
                    position,
                    f"key chain entry: inclusion proof does not verify against checkpoint #{record.seq}",
                )
        self.checkpoint_checked = True

    def entry_line(self, entry: bytes, envelope: dict[str, Any], proof: dict[str, Any]) -> None:
        record = self.checkpoint
        assert record is not None
        position = envelope["position"]
        tenant = envelope.get("tenant_id")
        if tenant != self.report.tenant_id:
            raise _Bad(
                position,
                f"entry of tenant {tenant!r} in an export of tenant {self.report.tenant_id!r} "
                "(spliced in from another export)",
            )
        if position <= self.last_position:
            raise _Bad(position, "entry listed twice or out of order")
        if position > record.tree_size:
            raise _Bad(position, f"entry beyond the checkpoint's {record.tree_size} entries")
        kid = kid_in_force(self.key_positions, position)
        signed = kid is not None and envelope.get("kid") == kid and entry_signature_ok(entry, self.keys[kid])
        proven = self._proven(entry, position, proof, "entry")
        if not signed and not proven:
            raise _Bad(position, "entry changed: neither its signature nor its inclusion proof verifies")
        if not signed:
            raise _Bad(position, "signature does not verify (or not by the key in force at its position)")
        if not proven:
            raise _Bad(
                position,
                f"inclusion proof does not verify against checkpoint #{record.seq} "
                "(proof altered, or not from this checkpoint)",
                record.seq,
            )
        self.last_position = position
        report = self.report
        report.entries += 1
        report.first_position = report.first_position or position
        report.last_position = position

    def trailer(self, line: bytes) -> None:
        try:
            end = orjson.loads(line)["end"]
            counts = (int(end["entries"]), int(end["key_entries"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise _Bad(None, "trailer line malformed") from None
        if counts != (self.report.entries, self.report.key_entries):
            raise _Bad(
                None,
                f"the trailer counts {counts[0]} entries and {counts[1]} key entries, "
                f"the file holds {self.report.entries} and {self.report.key_entries} "
                "(lines removed or added)",
            )


def verify_tenant_export(path: Path, trusted_root_key: bytes) -> TenantExportReport:
    """Check a tenant export offline with nothing but the root public key: the key chain
    from the root key, the checkpoint's signature, and every entry's signature and
    inclusion proof against that checkpoint. Stops at the first problem."""
    report = TenantExportReport()
    verifier = _Verifier(trusted_root_key, report)
    try:
        with path.open("rb") as handle:
            lines = (raw.rstrip(b"\n") for raw in iter(lambda: handle.readline(_MAX_LINE_BYTES), b""))
            verifier.header(next(lines, b""))
            number, ended = 1, False
            for line in lines:
                number += 1
                if ended:
                    raise _Bad(None, f"line {number}: data after the trailer")
                if line.startswith(b'{"end":'):
                    if verifier.checkpoint is None:
                        raise _Bad(None, "no checkpoint in the export")
                    if not verifier.checkpoint_checked:
                        verifier.open_checkpoint()
                    verifier.trailer(line)
                    ended = True
                elif line.startswith(b'{"checkpoint":'):
                    if verifier.checkpoint is not None or number != 2:
                        raise _Bad(None, f"line {number}: a second checkpoint, or one out of place")
                    verifier.checkpoint_line(line)
                elif verifier.checkpoint is None:
                    raise _Bad(None, f"line {number}: entry before any checkpoint")
                else:
                    kind, proof, entry, envelope = _split(line, number)
                    if kind == "key" and not verifier.checkpoint_checked and report.entries == 0:
                        verifier.key_line(entry, envelope, proof)
                    elif kind == "entry":
                        if not verifier.checkpoint_checked:
                            verifier.open_checkpoint()
                        verifier.entry_line(entry, envelope, proof)
                    else:
                        raise _Bad(envelope["position"], f"line {number}: unexpected {kind!r} line")
            if not ended:
                raise _Bad(None, "file ends without its trailer (cut off)")
    except _Bad as bad:
        report.findings.append(bad.finding)
    return report


__all__ = [
    "TENANT_EXPORT_FORMAT",
    "TenantExportReport",
    "is_tenant_export",
    "iter_tenant_export",
    "verify_tenant_export",
]
