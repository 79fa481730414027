"""The record-keeping report (issue 31): written from a ledger holding every kind of tenant event,
on the real SQLite and PostgreSQL stores, and checked offline; every kind of tampering fails."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import orjson
import pypdf
import pytest
import zstandard

from api.token_admin import issue_token, revoke_token
from ledger.config import LedgerConfig
from ledger.domain.events import AccessDenied as AccessDeniedEvent
from ledger.domain.payloads import EventType
from ledger.domain.timestamps import format_timestamp
from ledger.evidence import report_entries
from ledger.evidence import report_files as files
from ledger.evidence.report_check import verify_report
from ledger.schemas.requests import ErasureIn, LegalHoldIn, PolicyBundleIn
from ledger.tlog.checkpoints import CheckpointRecord, make_checkpoint
from ledger.tlog.cosignature import parse_cosigner_vkey
from ledger.tlog.signing import KeyDirectory
from ledger.usecases.content import read_content
from ledger.usecases.context import Caller, record
from ledger.usecases.documents import remove_document
from ledger.usecases.errors import AccessDenied, Invalid, TooLarge
from ledger.usecases.policy import publish_policy
from ledger.usecases.replay import replay
from ledger.usecases.report import issue_report, report_period
from ledger.usecases.retention import erase, place_hold, release_hold
from ledger.writing.application import Ledger
from tests.conftest import fresh_config
from tests.factories import TENANT, UseCases
from tests.fixture_ledgers import fixture_versions, restore
from tests.server_process import run_cli, server_env
from tests.witness_support import WitnessProcess

OTHER = "globex"
AUDITOR = Caller(TENANT, "auditor-1", frozenset({"audit.read", "audit.content"}))
BUNDLE = "version: r1\nrules:\n  - id: hb-redacted\n    action: redact\n    match: {paths: ['handbook/**']}\n"
SECRET_QUESTION = "what does the erased memo say about the merger"
ERASED_TEXT = "Confidential merger memo: project nightjar closes in March."


@dataclass
class Built:
    config: LedgerConfig
    root_key: Path
    report: Path
    other_report: Path
    period_from: str
    period_to: str
    in_period_receipts: int
    other_receipt_id: str


def _now() -> datetime:
    return datetime.now(UTC)


def _pause() -> None:
    time.sleep(0.02)  # checkpoints are chosen by issue time: keep the period's edges apart


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    root = tmp_path_factory.mktemp(f"report-{request.param}")
    with fresh_config(request.param, root) as config:
        ledger = Ledger(config)
        try:
            yield _build(ledger, config, root)
        finally:
            ledger.close()


def _build(ledger: Ledger, config: LedgerConfig, root: Path) -> Built:
    uc = UseCases(ledger)
    ctx = uc.ctx
    admin = Caller(TENANT, "admin-1", frozenset({"admin", "audit.read", "audit.content", "replay.run"}))
    # Before the period: a policy, a document and the oldest receipt.
    publish_policy(ctx, admin, PolicyBundleIn(bundle_yaml=BUNDLE, policy_version="p-before"))
    first_doc = uc.ingest("The retention floor is 180 days.")
    uc.retrieve(first_doc)
    ledger.issue_checkpoint()
    _pause()
    start = _now()
    _pause()
    # In the period: every kind of tenant event.
    doc = uc.ingest("Logs are kept for two years in the archive.", path="docs/b.md")
    memo = uc.ingest(ERASED_TEXT, path="docs/memo.md")
    receipts = [
        uc.retrieve(doc),
        uc.retrieve(doc, "where are logs archived?"),
        uc.retrieve(memo, SECRET_QUESTION),
    ]
    other = uc.retrieve(
        uc.ingest("Globex keeps nothing.", tenant=OTHER), "globex secret question", tenant=OTHER
    )
    publish_policy(
        ctx, admin, PolicyBundleIn(bundle_yaml=BUNDLE.replace("r1", "r2"), policy_version="p-during")
    )
    hold = place_hold(
        ctx, admin, LegalHoldIn(document_ids=[doc.payload["document_id"]], legal_basis="litigation")
    )
    release_hold(ctx, admin, hold["hold_id"])
    erase(ctx, admin, ErasureIn(document_id=memo.payload["document_id"]))
    record(
        ctx,
        Caller(TENANT, "reader-9"),
        [
            AccessDeniedEvent(
                resource_type="citation",
                resource_id="c-1",
                required_scope="knowledge.restricted.read",
                reason="restricted",
            )
        ],
        lambda _events: {},
    )
    read_content(ctx, admin, [receipts[0]])
    replay(ctx, admin, receipts[1].payload["receipt_id"])
    remove_document(ctx, uc.claims, admin, doc.payload["document_id"], "withdrawn")
    # A document too large for one entry (DocumentContinued parts), and an earlier report.
    uc.ingest(
        "\n\n".join(f"## Section {i}\n\n" + "audit words " * 150 for i in range(60)), path="docs/big.md"
    )
    earlier = report_period(format_timestamp(start), format_timestamp(_now()), now=_now())
    issue_report(ctx, AUDITOR, earlier, root / "earlier-report", pdf=False)
    _token, view, _position = issue_token(
        ledger, root / "tokens.json", actor="admin-1", tenant=TENANT, scopes=["audit.read"]
    )
    revoke_token(ledger, root / "tokens.json", view["token_id"], actor="admin-1")
    ledger.rotate_signing_key()
    ledger.issue_checkpoint()
    _pause()
    end = _now() + timedelta(milliseconds=1)
    _pause()
    period = report_period(format_timestamp(start), format_timestamp(end), now=_now())
    report = root / "report"
    issue_report(ctx, AUDITOR, period, report)
    other_report = root / "other-report"
    issue_report(ctx, Caller(OTHER, "auditor-2", frozenset({"audit.read"})), period, other_report, pdf=False)
    return Built(
        config=config,
        root_key=KeyDirectory(config.keys_dir).root_public_key_path,
        report=report,
        other_report=other_report,
        period_from=format_timestamp(start),
        period_to=format_timestamp(end),
        in_period_receipts=len(receipts) + 1,  # and the replay's own receipt
        other_receipt_id=other.payload["receipt_id"],
    )


def _root(built: Built) -> bytes:
    return KeyDirectory(built.config.keys_dir).root_public_key()


def _manifest(directory: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = orjson.loads((directory / files.MANIFEST).read_bytes())
    return manifest


def _figure(manifest: dict[str, Any], fid: str) -> Any:
    return next(f["value"] for f in manifest["figures"] if f["id"] == fid)


def _copy(built: Built, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(built.report, target)
    return target


def _rewrite_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    (directory / files.MANIFEST).write_bytes(
        orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )


def test_report_verifies_and_counts_only_the_tenant(built: Built) -> None:
    result = verify_report(built.report, _root(built), tenant=TENANT)
    assert result.ok, result.problem
    manifest = _manifest(built.report)
    assert _figure(manifest, "retrievals.total") == built.in_period_receipts
    assert _figure(manifest, "retrievals.mode.as_of_replay") == 1
    # The set-up writes an entry of every type but these two (an integrity repair, and a retrieval
    # too large for one entry): a type added later must show up in the coverage figures too.
    for kind in sorted(set(get_args(EventType)) - {"IntegrityRepaired", "RetrievalContinued"}):
        assert _figure(manifest, f"coverage.type.{kind}") >= 1, kind
    assert _figure(manifest, "integrity.reports.count") == 1  # the earlier report is in the record
    for fid in (
        "access.denials.count",
        "access.content_reads.count",
        "erasures.erasures.count",
        "erasures.holds_placed.count",
        "erasures.holds_released.count",
        "replays.replays.count",
        "integrity.key_rotations.count",
    ):
        assert _figure(manifest, fid) >= 1, fid
    policies = _figure(manifest, "policies.in_force")
    assert [row["policy_version"] for row in policies] == ["p-before", "p-during"]
    oldest = _figure(manifest, "retention.oldest_receipt")
    assert oldest["six_months_held"] is False
    assert result.entries == _figure(manifest, "coverage.entries")
    # Another tenant's entries are never counted nor named, anywhere in the output.
    every_byte = b"".join(path.read_bytes() for path in built.report.rglob("*") if path.is_file())
    assert built.other_receipt_id.encode() not in every_byte
    assert OTHER.encode() not in every_byte
    # The erased document's text never appears; the sampled questions do, for audit.content only.
    assert ERASED_TEXT.encode() not in every_byte
    html = (built.report / files.HTML).read_text()
    assert "how long are logs kept?" in html
    other_html = (built.other_report / files.HTML).read_text()
    assert "globex secret question" not in other_html and "question</th>" not in other_html
    mapping = {row["requirement"] for row in manifest["mapping"]}
    assert {
        "EU AI Act Art. 12(1)",
        "EU AI Act Art. 19(1)",
        "EU AI Act Art. 26(6)",
        "ISO/IEC 42001 A.6.2.8",
    } <= mapping
    assert "does not show" in html and "correct" in html


def test_report_is_in_the_record(built: Built) -> None:
    """The manifest's hash is a signed ReportIssued entry of the tenant: the next report counts it."""
    issued = orjson.loads((built.report / files.ISSUED).read_bytes())
    digest = hashlib.sha256((built.report / files.MANIFEST).read_bytes()).hexdigest()
    assert issued["entry"]["type"] == "ReportIssued"
    assert issued["entry"]["payload"]["manifest_sha256"] == digest
    with Ledger(LedgerConfig(**{**built.config.__dict__, "run_checkpointer": False})) as ledger:
        event = ledger.get(issued["entry"]["position"])
        assert event is not None and event.tenant_id == TENANT


def test_verify_report_command_offline(built: Built) -> None:
    """The command line's check, in its own process, with the root key alone."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "verify-report",
            str(built.report),
            "--public-key",
            str(built.root_key),
            "--tenant",
            TENANT,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("OK report of tenant acme")


def test_edited_manifest_figure_fails(built: Built, tmp_path: Path) -> None:
    copy = _copy(built, tmp_path)
    manifest = _manifest(copy)
    figure = next(f for f in manifest["figures"] if f["id"] == "retrievals.total")
    figure["value"] += 1
    _rewrite_manifest(copy, manifest)
    result = verify_report(copy, _root(built))
    assert not result.ok
    assert result.problem is not None and "figure retrievals.total" in result.problem


def test_edited_html_number_fails(built: Built, tmp_path: Path) -> None:
    copy = _copy(built, tmp_path)
    html = (copy / files.HTML).read_text()
    total = _figure(_manifest(copy), "retrievals.total")
    marked = f'<span data-figure="retrievals.total">{total}</span>'
    assert marked in html
    (copy / files.HTML).write_text(
        html.replace(marked, f'<span data-figure="retrievals.total">{total + 7}</span>')
    )
    result = verify_report(copy, _root(built))
    assert not result.ok
    assert result.problem is not None and result.problem.startswith("report.html: figure retrievals.total")


@pytest.mark.parametrize(
    "name", [files.ENTRIES, files.CITED, files.LEAVES, files.END_CHECKPOINT, files.ISSUED]
)
def test_removed_evidence_file_fails(built: Built, tmp_path: Path, name: str) -> None:
    copy = _copy(built, tmp_path)
    (copy / name).unlink()
    result = verify_report(copy, _root(built))
    assert not result.ok
    assert result.problem is not None and result.problem.startswith(f"{name}: missing")


def test_changed_evidence_file_fails(built: Built, tmp_path: Path) -> None:
    """An evidence file changed, the manifest left as it was: its hash names it."""
    copy = _copy(built, tmp_path)
    (copy / files.LEAVES).write_bytes(bytes(32) + (copy / files.LEAVES).read_bytes()[32:])
    result = verify_report(copy, _root(built))
    assert not result.ok
    assert result.problem == f"{files.LEAVES}: changed: its SHA-256 is not the one the manifest lists"


def _rewrite_entries(directory: Path, lines: list[bytes]) -> None:
    """The counted entries replaced by `lines`, compressed as a report writes them, and the
    manifest's hash of the file restated to hide the change."""
    (directory / files.ENTRIES).write_bytes(zstandard.ZstdCompressor().compress(b"".join(lines)))
    manifest = _manifest(directory)
    manifest["evidence"][files.ENTRIES] = hashlib.sha256((directory / files.ENTRIES).read_bytes()).hexdigest()
    _rewrite_manifest(directory, manifest)


def _entry_lines(directory: Path) -> list[bytes]:
    raw = zstandard.ZstdDecompressor().decompressobj().decompress((directory / files.ENTRIES).read_bytes())
    return raw.splitlines(keepends=True)


def test_dropped_entry_fails_even_with_the_hashes_restated(built: Built, tmp_path: Path) -> None:
    """An entry left out of the evidence, the manifest's file hash updated to hide it: the
    figures no longer add up."""
    copy = _copy(built, tmp_path)
    lines = _entry_lines(copy)
    dropped = next(line for line in lines if b'"type":"AccessDenied"' in line)
    _rewrite_entries(copy, [line for line in lines if line != dropped])
    result = verify_report(copy, _root(built))
    assert not result.ok
    assert result.problem is not None and "figure" in result.problem


def test_edited_entry_fails_even_with_the_hashes_restated(built: Built, tmp_path: Path) -> None:
    """An entry's bytes changed inside the compressed evidence: its hash is not the leaf."""
    copy = _copy(built, tmp_path)
    lines = _entry_lines(copy)
    at = next(i for i, line in enumerate(lines) if b'"type":"AccessDenied"' in line)
    lines[at] = lines[at].replace(b'"actor":"', b'"actor":"x', 1)
    _rewrite_entries(copy, lines)
    result = verify_report(copy, _root(built))
    assert not result.ok
    assert result.problem is not None and result.problem.startswith(files.ENTRIES)
    assert "not the entry the log holds there" in result.problem


def test_entries_not_zstandard_fails_clearly(built: Built, tmp_path: Path) -> None:
    copy = _copy(built, tmp_path)
    plain = b"".join(_entry_lines(copy))
    (copy / files.ENTRIES).write_bytes(plain)
    manifest = _manifest(copy)
    manifest["evidence"][files.ENTRIES] = hashlib.sha256(plain).hexdigest()
    _rewrite_manifest(copy, manifest)
    result = verify_report(copy, _root(built))
    assert not result.ok
    assert result.problem is not None and result.problem.startswith(
        f"{files.ENTRIES}: not a readable Zstandard"
    )


def test_earlier_report_format_is_named(built: Built, tmp_path: Path) -> None:
    """A report of an earlier layout is refused with what it is and what this checker reads."""
    copy = _copy(built, tmp_path)
    manifest = _manifest(copy)
    manifest["format"] = "citeledger-report/1"
    _rewrite_manifest(copy, manifest)
    result = verify_report(copy, _root(built))
    assert not result.ok and result.problem is not None
    assert result.problem.startswith("manifest.json: a citeledger-report/1 report")
    assert "citeledger-report/2 reports only" in result.problem


def _swap_end_checkpoint(directory: Path, record: CheckpointRecord) -> None:
    (directory / files.END_CHECKPOINT).write_bytes(orjson.dumps(record.to_json()))
    manifest = _manifest(directory)
    digest = hashlib.sha256((directory / files.END_CHECKPOINT).read_bytes()).hexdigest()
    manifest["evidence"][files.END_CHECKPOINT] = digest
    manifest["range"]["end_size"] = record.tree_size
    _rewrite_manifest(directory, manifest)


def test_checkpoint_from_another_log_fails(built: Built, tmp_path: Path) -> None:
    """The end checkpoint swapped for one of another log, the manifest's hashes restated: its
    root proves none of this log's entries; the same root signed by another log's key is refused
    by its signature."""
    copy = _copy(built, tmp_path)
    with Ledger(LedgerConfig(data_dir=tmp_path / "elsewhere", run_checkpointer=False)) as stranger:
        foreign = stranger.issue_checkpoint()
        assert foreign is not None
        _swap_end_checkpoint(copy, foreign)
        result = verify_report(copy, _root(built))
        assert not result.ok and result.problem is not None
        assert result.problem.startswith(f"{files.KEY_CHAIN}: line 1: key entry 1:"), result.problem
        ours = CheckpointRecord.from_json(orjson.loads((built.report / files.END_CHECKPOINT).read_bytes()))
        forged = make_checkpoint(
            seq=ours.seq,
            origin=stranger.origin,
            tree_size=ours.tree_size,
            root=ours.root,
            issued_at=ours.issued_at,
            key=stranger.signing_key(),
        )
    _swap_end_checkpoint(copy, forged)
    result = verify_report(copy, _root(built))
    assert not result.ok and result.problem is not None
    assert result.problem.startswith(
        f"{files.END_CHECKPOINT}: checkpoint #{ours.seq} does not verify for this log"
    )


def test_another_tenants_report_fails(built: Built, tmp_path: Path) -> None:
    """A report of another tenant is refused by an auditor expecting this one, and relabelling
    its manifest with this tenant fails on the entries it counts."""
    refused = verify_report(built.other_report, _root(built), tenant=TENANT)
    assert not refused.ok and refused.problem is not None and "tenant 'globex'" in refused.problem
    assert verify_report(built.other_report, _root(built), tenant=OTHER).ok
    relabelled = tmp_path / "relabelled"
    shutil.copytree(built.other_report, relabelled)
    manifest = _manifest(relabelled)
    manifest["tenant_id"] = TENANT
    manifest["sample_seed"] = manifest["sample_seed"].rsplit("/", 1)[0] + "/" + TENANT
    _rewrite_manifest(relabelled, manifest)
    result = verify_report(relabelled, _root(built), tenant=TENANT)
    assert not result.ok
    assert result.problem is not None and "of 'globex' in a report of 'acme'" in result.problem


def test_pdf_has_the_reports_text(built: Built) -> None:
    """Printed by the system Chromium from the HTML: the same numbers and the manifest's hash."""
    pdf = built.report / files.PDF
    assert shutil.which("chromium") and pdf.exists()
    text = " ".join(page.extract_text() for page in pypdf.PdfReader(pdf).pages)
    digest = hashlib.sha256((built.report / files.MANIFEST).read_bytes()).hexdigest()
    assert "Record-keeping report" in text
    assert digest[:32] in text.replace("\n", "").replace(" ", "")
    assert "retrievals recorded" in text and "What this report does not show" in text


def test_refusals_write_nothing(built: Built, tmp_path: Path) -> None:
    now = _now()
    with pytest.raises(Invalid, match="at most 366 days"):
        report_period("2025-01-01", "2026-06-01", now=now)
    with pytest.raises(Invalid, match=r"^to: the period ends before it starts"):
        report_period("2026-06-01", "2026-05-01", now=now)
    with pytest.raises(Invalid, match=r"^from: "):
        report_period("last tuesday", "2026-05-01", now=now)
    with Ledger(LedgerConfig(**{**built.config.__dict__, "run_checkpointer": False})) as ledger:
        ctx = UseCases(ledger).ctx
        period = report_period(built.period_from, built.period_to, now=now)
        size = ledger.size
        with pytest.raises(AccessDenied):
            issue_report(ctx, Caller(TENANT, "nobody", frozenset()), period, tmp_path / "a")
        with pytest.raises(TooLarge, match="more than 3 entries"):
            issue_report(ctx, AUDITOR, period, tmp_path / "b", max_entries=3, pdf=False)
        assert not (tmp_path / "b").exists()
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / "x").write_text("x")
        with pytest.raises(Invalid, match="not empty"):
            issue_report(ctx, AUDITOR, period, tmp_path / "c", pdf=False)
        assert ledger.size == size  # nothing appended by a refused report


def test_witness_cosignatures_of_the_end_checkpoint(tmp_path: Path) -> None:
    """A real witness process cosigns the end checkpoint: `verify-report` with its key names it,
    with another key of the same name fails, and the report's witness figure counts it."""
    config = LedgerConfig(data_dir=tmp_path / "data", run_checkpointer=False)
    with Ledger(config) as ledger:
        log_vkey = ledger.vkey
    with WitnessProcess(tmp_path / "w1", "witness.test/w1", log_vkey) as witness:
        stranger = WitnessProcess(tmp_path / "w2", "witness.test/w1", log_vkey)
        with Ledger(replace(config, witnesses=witness.setting)) as ledger:
            uc = UseCases(ledger)
            ledger.issue_checkpoint()
            _pause()
            start = _now()
            uc.retrieve(uc.ingest())
            _pause()
            period = report_period(format_timestamp(start), format_timestamp(_now()), now=_now())
            issue_report(uc.ctx, AUDITOR, period, tmp_path / "report", pdf=False)
    root = KeyDirectory(config.keys_dir).root_public_key()
    trusted = verify_report(
        tmp_path / "report", root, witnesses=[parse_cosigner_vkey(witness.vkey)], min_witnesses=1
    )
    assert trusted.ok, trusted.problem
    assert trusted.cosigned_by == ["witness.test/w1"]
    coverage = _figure(_manifest(tmp_path / "report"), "integrity.witnesses")
    assert coverage["cosigned_by"] == {"witness.test/w1": 1}
    forged = verify_report(
        tmp_path / "report", root, witnesses=[parse_cosigner_vkey(stranger.vkey)], min_witnesses=1
    )
    assert not forged.ok and forged.problem is not None
    assert forged.problem.startswith(
        f"{files.END_CHECKPOINT}: checkpoint cosigned by 0 of the 1 trusted witnesses"
    )


@pytest.mark.parametrize("version", fixture_versions())
def test_report_over_a_fixture_ledger(version: str, tmp_path: Path) -> None:
    """A ledger written by an earlier version, migrated as documented: the command line reports
    on it and the report verifies offline."""
    with restore(version, "sqlite", tmp_path) as restored:
        env = server_env(restored.config, "fixture-unused-bootstrap-token-000")
        data = ["--data-dir", str(restored.data_dir)]
        assert run_cli(["migrate", *data], env).returncode == 0
        made = datetime.fromtimestamp(float(restored.manifest["made_at"]), UTC).date()
        period = ["--from", str(made - timedelta(days=2)), "--to", str(made + timedelta(days=2))]
        out = tmp_path / "report"
        issued = run_cli(["report", "--tenant", "acme", *period, "--out", str(out), "--no-pdf", *data], env)
        assert issued.returncode == 0, issued.stdout + issued.stderr
        root_key = restored.data_dir / "keys" / "root.pub"
        checked = run_cli(
            ["verify-report", str(out), "--public-key", str(root_key), "--tenant", "acme", "--deep"], env
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert checked.stdout.startswith("OK report of tenant acme")
        assert _figure(_manifest(out), "retrievals.total") >= 1


@pytest.fixture
def split_in_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """One entry a chunk, every chunk but the first in a worker process (the test report is small)."""
    monkeypatch.setattr(report_entries, "CHUNK_BYTES", 1)
    monkeypatch.setattr(report_entries, "PROCESSES_AFTER", 1)


def _position(line: bytes) -> int:
    return int(orjson.loads(line)["position"])


def _fails_alike_when_split(
    built: Built, copy: Path, lines: list[bytes], monkeypatch: pytest.MonkeyPatch, processes_after: int
) -> tuple[str, int]:
    """`copy`'s entries rewritten as `lines`, checked by one process, then a line a chunk with
    chunks in worker processes: both fail with the same problem (returned, with the number of
    chunks the workers checked)."""
    _rewrite_entries(copy, lines)
    alone = verify_report(copy, _root(built))
    monkeypatch.setattr(report_entries, "CHUNK_BYTES", 1)  # one read a byte: a chunk a line
    monkeypatch.setattr(report_entries, "PROCESSES_AFTER", processes_after)
    split = verify_report(copy, _root(built))
    assert not split.ok and split.problem == alone.problem
    return str(split.problem), split.chunks_in_processes


@pytest.mark.usefixtures("split_in_workers")
def test_entries_split_over_worker_processes_verify_alike(built: Built) -> None:
    whole = verify_report(built.report, _root(built), deep=True)
    assert whole.ok, whole.problem
    assert whole.chunks_in_processes >= 2
    assert whole.entries == len(_entry_lines(built.report)) and whole.signatures >= whole.entries


def test_edited_entry_in_a_worker_process_fails_at_its_position(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last entry edited (its chunk checked in a worker process): the same problem, with the
    same position, as when one process checks every entry."""
    copy = _copy(built, tmp_path)
    lines = _entry_lines(copy)
    lines[-1] = lines[-1].replace(b'"actor":"', b'"actor":"x', 1)
    problem, chunks = _fails_alike_when_split(built, copy, lines, monkeypatch, processes_after=1)
    assert chunks >= 2
    assert problem == f"{files.ENTRIES}: position {_position(lines[-1])}: not the entry the log holds there"


@pytest.mark.parametrize("at", [1, 2])
def test_entry_repeated_across_a_chunk_edge_fails(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """An entry listed twice, each copy its own chunk checked in a worker process (the order
    check crosses the chunks' edge), right after the first line (at=1) or further on (at=2):
    named as when one process checks."""
    copy = _copy(built, tmp_path)
    lines = _entry_lines(copy)
    repeated = lines[at - 1]
    edited = [*lines[:at], repeated, *lines[at:]]
    problem, chunks = _fails_alike_when_split(built, copy, edited, monkeypatch, processes_after=0)
    assert chunks >= 1
    assert problem == f"{files.ENTRIES}: position {_position(repeated)}: listed twice or out of order"
