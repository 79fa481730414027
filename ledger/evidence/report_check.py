"""`verify-report`: a report's directory checked offline with the root public key alone.

What is checked, in order, stopping at the first problem (named with the file and,
where there is one, the position or figure):
- the manifest's format and tenant, and the hash of every evidence file it lists;
- the key chain from the root key (each key entry proven against the end checkpoint);
- the start and end checkpoints: signed by a key of the chain for this log's origin, cosigned
  by the trusted witnesses, and consistent (the RFC 9162 consistency proof);
- the range: the start tree's frontier and every leaf hash up to the end size rebuild both roots;
- every counted entry: its hash the leaf at its position (so the signed checkpoint's root
  vouches for its bytes), the tenant's (or the ledger's key and repair entries), recorded in
  the period; with `deep`, its own signature by the key in force too (as `verify --deep`);
- every cited entry: its inclusion proof against the end checkpoint;
- every figure recomputed from those entries equals the manifest's;
- the HTML carries the manifest's hash and shows each figure as the manifest says;
- the `ReportIssued` entry's bundle names this manifest's hash.

Imports no database driver, web framework or HTTP client (the `offline` contract).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ledger.domain.keychain import KeyChainError, check_key_event
from ledger.domain.timestamps import parse_timestamp
from ledger.evidence import report_files as files
from ledger.evidence.bundle import BundleError, check_inclusion, verify_bundle
from ledger.evidence.report_entries import EntriesChecked, Keys, check_entries, signed
from ledger.evidence.report_figures import (
    EARLIER_FORMATS,
    REPORT_FORMAT,
    FigureBuilder,
    Period,
    checkpoint_figures,
)
from ledger.evidence.report_files import ReportInvalid
from ledger.evidence.report_html import check_html
from ledger.tlog.checkpoints import CheckpointRecord, open_record, origin_for
from ledger.tlog.cosignature import Witness, require_cosignatures
from ledger.tlog.merkle import HASH_SIZE, ProofError, verify_consistency
from ledger.tlog.note import NoteError
from ledger.tlog.signing import b64

_MAX_LINE = 4 * 1024 * 1024
_MAX_MANIFEST = 256 * 1024 * 1024


@dataclass
class ReportCheck:
    ok: bool = False
    tenant_id: str = ""
    period: dict[str, str] = field(default_factory=dict)
    entries: int = 0
    figures: int = 0
    cited: int = 0
    cosigned_by: list[str] = field(default_factory=list)
    signatures: int = 0  # entry signatures checked (every counted one with `deep`, else the cited ones)
    problem: str | None = None
    chunks_in_processes: int = 0  # chunks of the counted entries checked in worker processes


def _read(directory: Path, name: str, limit: int = _MAX_MANIFEST) -> bytes:
    path = directory / name
    try:
        if path.stat().st_size > limit:
            raise ReportInvalid(name, "larger than the checker reads")
        return path.read_bytes()
    except FileNotFoundError:
        raise ReportInvalid(name, "missing") from None


def _lines(directory: Path, name: str) -> Iterator[bytes]:
    path = directory / name
    if not path.exists():
        raise ReportInvalid(name, "missing")
    with path.open("rb") as handle:
        for raw in iter(lambda: handle.readline(_MAX_LINE), b""):
            yield raw.rstrip(b"\n")


class _Checker:
    def __init__(
        self,
        directory: Path,
        root_key: bytes,
        witnesses: Sequence[Witness],
        min_witnesses: int,
        tenant: str | None,
        deep: bool = False,
    ) -> None:
        self.deep = deep
        self.dir, self.root_key, self.witnesses, self.min_witnesses = (
            directory,
            root_key,
            witnesses,
            min_witnesses,
        )
        self.expected_tenant = tenant
        self.origin = origin_for(root_key)
        self.keys: dict[str, bytes] = {}
        self.key_positions: list[tuple[int, str]] = []
        self.result = ReportCheck()

    def manifest(self) -> tuple[dict[str, Any], str]:
        raw = _read(self.dir, files.MANIFEST)
        try:
            manifest = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ReportInvalid(files.MANIFEST, "not JSON") from None
        stated = manifest.get("format") if isinstance(manifest, dict) else None
        if stated in EARLIER_FORMATS:
            raise ReportInvalid(
                files.MANIFEST,
                f"a {stated} report ({EARLIER_FORMATS[stated]}); this verify-report checks "
                f"{REPORT_FORMAT} reports only: check it with the citeledger that wrote it, "
                "or issue the report again",
            )
        if not isinstance(manifest, dict) or stated != REPORT_FORMAT:
            raise ReportInvalid(files.MANIFEST, f"not a {REPORT_FORMAT} manifest")
        if manifest.get("origin") != self.origin or manifest.get("root_public_key") != b64(self.root_key):
            raise ReportInvalid(files.MANIFEST, "names another log than the trusted root key's")
        tenant = manifest.get("tenant_id")
        if self.expected_tenant is not None and tenant != self.expected_tenant:
            raise ReportInvalid(
                files.MANIFEST, f"a report of tenant {tenant!r}, not of {self.expected_tenant!r}"
            )
        self.result.tenant_id, self.result.period = str(tenant), dict(manifest["period"])
        for name, digest in (manifest.get("evidence") or {}).items():
            if name not in files.LISTED:
                raise ReportInvalid(files.MANIFEST, f"lists an unknown evidence file {name!r}")
            path = self.dir / name
            if not path.exists():
                raise ReportInvalid(name, "missing (listed in the manifest)")
            actual = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    actual.update(block)
            if actual.hexdigest() != digest:
                raise ReportInvalid(name, "changed: its SHA-256 is not the one the manifest lists")
        for required in (
            files.END_CHECKPOINT,
            files.CONSISTENCY,
            files.KEY_CHAIN,
            files.FRONTIER,
            files.LEAVES,
            files.ENTRIES,
            files.CITED,
        ):
            if required not in (manifest.get("evidence") or {}):
                raise ReportInvalid(files.MANIFEST, f"does not list {required}")
        return manifest, hashlib.sha256(raw).hexdigest()

    def checkpoint(self, name: str) -> CheckpointRecord:
        try:
            record = CheckpointRecord.from_json(orjson.loads(_read(self.dir, name)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ReportInvalid(name, "malformed checkpoint") from None
        return record

    def key_chain(self, end: CheckpointRecord) -> None:
        for number, line in enumerate(_lines(self.dir, files.KEY_CHAIN), start=1):
            try:
                proof, entry = files.split_proven(line)
                envelope = orjson.loads(entry)
                position = int(envelope["position"])
                check_inclusion(entry, position, proof, end.root, end.tree_size, f"key entry {position}")
                current = self.key_positions[-1][1] if self.key_positions else None
                kid, public = check_key_event(envelope, position, self.keys, current, self.root_key)
            except KeyChainError as exc:
                raise ReportInvalid(files.KEY_CHAIN, f"line {number}: {exc.problem}") from None
            except (BundleError, ValueError, KeyError, TypeError) as exc:
                raise ReportInvalid(files.KEY_CHAIN, f"line {number}: {exc}") from None
            self.keys[kid] = public
            self.key_positions.append((position, kid))
        if not self.key_positions or self.key_positions[0][0] != 1:
            raise ReportInvalid(files.KEY_CHAIN, "does not start at the genesis entry")

    def open_checkpoint(self, name: str, record: CheckpointRecord, *, witnessed: bool = False) -> None:
        """The log's signature; with `witnessed` (the end checkpoint, which vouches for the whole
        range and, through the consistency proof, for the start) the trusted witnesses' too."""
        try:
            open_record(record, self.origin, self.keys)
        except (NoteError, ValueError) as exc:
            raise ReportInvalid(
                name, f"checkpoint #{record.seq} does not verify for this log: {exc}"
            ) from None
        if self.witnesses and witnessed:
            try:
                found = require_cosignatures(record.note, self.witnesses, self.min_witnesses)
            except NoteError as exc:
                raise ReportInvalid(name, str(exc)) from None
            self.result.cosigned_by = sorted({c.witness for c in found} | set(self.result.cosigned_by))

    def range(self, start: CheckpointRecord | None, end: CheckpointRecord) -> bytes:
        start_size = start.tree_size if start else 0
        try:
            consistency = orjson.loads(_read(self.dir, files.CONSISTENCY))
            if (consistency["old_size"], consistency["new_size"]) != (start_size, end.tree_size):
                raise ReportInvalid(files.CONSISTENCY, "proves other sizes than the two checkpoints'")
            if start is not None:
                hashes = [bytes.fromhex(h) for h in consistency["hashes"][:65]]
                verify_consistency(start_size, end.tree_size, start.root, end.root, hashes)
            compact = files.CompactRange(files.frontier_of(orjson.loads(_read(self.dir, files.FRONTIER))))
        except (ProofError, KeyError, TypeError, ValueError) as exc:
            raise ReportInvalid(
                files.CONSISTENCY if "consisten" in str(exc) else files.FRONTIER, str(exc)
            ) from None
        if compact.size != start_size or (start is not None and compact.root() != start.root):
            raise ReportInvalid(files.FRONTIER, "does not rebuild the start checkpoint's root")
        leaves = _read(self.dir, files.LEAVES, limit=1 << 40)
        if len(leaves) != HASH_SIZE * (end.tree_size - start_size):
            raise ReportInvalid(
                files.LEAVES,
                f"holds {len(leaves) // HASH_SIZE} leaf hashes, the range has {end.tree_size - start_size}",
            )
        compact.extend(leaves[i : i + HASH_SIZE] for i in range(0, len(leaves), HASH_SIZE))
        if compact.root() != end.root:
            raise ReportInvalid(
                files.LEAVES,
                "the leaf hashes do not rebuild the end checkpoint's root "
                "(an entry changed, removed or added)",
            )
        return leaves

    def entries(self, builder: FigureBuilder, leaves: bytes, start_size: int) -> None:
        keys = Keys(self.keys, self.key_positions) if self.deep else None
        checked = EntriesChecked()
        try:
            check_entries(self.dir / files.ENTRIES, builder, leaves, start_size, keys, checked)
        finally:
            self.result.entries += checked.entries
            self.result.signatures += checked.signatures
            self.result.chunks_in_processes = checked.in_processes

    def cited(self, end: CheckpointRecord) -> dict[int, dict[str, Any]]:
        proven: dict[int, dict[str, Any]] = {}
        for line in _lines(self.dir, files.CITED):
            try:
                proof, entry = files.split_proven(line)
                envelope = orjson.loads(entry)
                position = int(envelope["position"])
                check_inclusion(entry, position, proof, end.root, end.tree_size, f"position {position}")
            except (BundleError, ValueError, KeyError, TypeError) as exc:
                raise ReportInvalid(files.CITED, str(exc)) from None
            signed(entry, envelope, Keys(self.keys, self.key_positions), files.CITED)
            self.result.signatures += 1
            proven[position] = envelope
        self.result.cited = len(proven)
        return proven


def _context(
    manifest: dict[str, Any], cited: dict[int, dict[str, Any]], tenant: str, period: Period
) -> dict[str, Any]:
    """The entries before the period that two figures name, each proven in `cited`."""
    context: dict[str, Any] = {"oldest_receipt": None, "policy_at_start": None}
    for figure in manifest["figures"]:
        if figure["id"] == "retention.oldest_receipt" and figure["value"]:
            context["oldest_receipt"] = cited.get(figure["value"]["position"])
        if figure["id"] == "policies.in_force" and figure["value"]:
            first = cited.get(figure["value"][0]["position"])
            if first is not None and parse_timestamp(first["recorded_at"]) < period.start:
                context["policy_at_start"] = first
    for name, kind in (("oldest_receipt", "RetrievalRecorded"), ("policy_at_start", "PolicyBundlePublished")):
        entry = context[name]
        if entry is not None and (entry.get("tenant_id") != tenant or entry.get("type") != kind):
            raise ReportInvalid(
                files.CITED, f"position {entry.get('position')}: not a {kind} of tenant {tenant!r}"
            )
    return context


def _compare(manifest_figures: list[dict[str, Any]], recomputed: list[dict[str, Any]]) -> None:
    listed = {f.get("id"): f for f in manifest_figures if isinstance(f, dict)}
    for figure in recomputed:
        stated = listed.pop(figure["id"], None)
        if stated is None:
            raise ReportInvalid(files.MANIFEST, f"figure {figure['id']}: missing")
        for key in ("value", "positions"):
            if stated.get(key) != figure[key]:
                shown = str(stated.get(key))[:80]
                raise ReportInvalid(
                    files.MANIFEST,
                    f"figure {figure['id']}: the manifest says {key} {shown}, "
                    f"the entries give {str(figure[key])[:80]}",
                )
    if listed:
        raise ReportInvalid(files.MANIFEST, f"figure {next(iter(listed))}: not computed from any entry")


def verify_report(
    directory: Path,
    root_key: bytes,
    *,
    witnesses: Sequence[Witness] = (),
    min_witnesses: int = 0,
    tenant: str | None = None,
    deep: bool = False,
) -> ReportCheck:
    """Check a report's directory offline (see the module's docstring); `deep` also checks
    every counted entry's own signature, which its leaf hash under the signed root already vouches for."""
    checker = _Checker(directory, root_key, witnesses, min_witnesses, tenant, deep)
    result = checker.result
    try:
        _verify(checker, directory)
        result.ok = True
    except ReportInvalid as exc:
        result.problem = str(exc)
    except (KeyError, TypeError, ValueError, IndexError) as exc:  # a manifest of the wrong shape
        result.problem = f"{files.MANIFEST}: malformed ({type(exc).__name__}: {exc})"
    return result


def _verify(checker: _Checker, directory: Path) -> None:
    manifest, digest = checker.manifest()
    tenant = checker.result.tenant_id
    period = Period(parse_timestamp(manifest["period"]["from"]), parse_timestamp(manifest["period"]["to"]))
    end = checker.checkpoint(files.END_CHECKPOINT)
    start = (
        checker.checkpoint(files.START_CHECKPOINT) if files.START_CHECKPOINT in manifest["evidence"] else None
    )
    expected = (manifest["range"]["start_size"], manifest["range"]["end_size"])
    if ((start.tree_size if start else 0), end.tree_size) != expected:
        raise ReportInvalid(files.MANIFEST, "its range is not the two checkpoints' sizes")
    checker.key_chain(end)
    if start is not None:
        checker.open_checkpoint(files.START_CHECKPOINT, start)
    checker.open_checkpoint(files.END_CHECKPOINT, end, witnessed=True)
    leaves = checker.range(start, end)
    cited = checker.cited(end)
    builder = FigureBuilder(tenant_id=tenant, period=period, seed=manifest["sample_seed"], context={})
    if manifest["sample_seed"] != f"{end.root.hex()}/{tenant}":
        raise ReportInvalid(files.MANIFEST, "sample seed is not drawn from the end checkpoint")
    checker.entries(builder, leaves, start.tree_size if start else 0)
    builder.context = _context(manifest, cited, tenant, period)
    checkpoints = [orjson.loads(line) for line in _lines(directory, files.PERIOD_CHECKPOINTS)]
    for item in checkpoints:
        checker.open_checkpoint(files.PERIOD_CHECKPOINTS, CheckpointRecord.from_json(item))
    recomputed = builder.figures() + checkpoint_figures(checkpoints, checker.origin)
    named = {row["position"] for f in recomputed for row in _rows(f["value"])}
    missing = sorted(named - set(cited))
    if missing:
        raise ReportInvalid(files.CITED, f"position {missing[0]}: named by a figure but not proven")
    _compare(manifest["figures"], recomputed)
    checker.result.figures = len(recomputed)
    check_html(directory, manifest, digest)
    _check_issued(directory, manifest, digest, checker)


def _rows(value: Any) -> list[dict[str, Any]]:
    rows = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
    return [row for row in rows if isinstance(row, dict) and "position" in row]


def _check_issued(directory: Path, manifest: dict[str, Any], digest: str, checker: _Checker) -> None:
    try:
        entry = verify_bundle(orjson.loads(_read(directory, files.ISSUED)), checker.root_key)
    except (BundleError, orjson.JSONDecodeError) as exc:
        raise ReportInvalid(files.ISSUED, str(exc)) from None
    payload = entry.get("payload") or {}
    if (
        entry.get("type") != "ReportIssued"
        or entry.get("tenant_id") != manifest["tenant_id"]
        or payload.get("report_id") != manifest["report_id"]
        or payload.get("manifest_sha256") != digest
    ):
        raise ReportInvalid(files.ISSUED, "the signed ReportIssued entry names another manifest")


__all__ = ["ReportCheck", "ReportInvalid", "verify_report"]
