"""The command line end to end, as an operator or auditor runs it (real subprocesses)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def citeledger(*args: str, data_dir: Path | None = None, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CITELEDGER_")}
    env.update(settings)
    command = [sys.executable, "-m", "cli.main", *args]
    if data_dir is not None:
        command += ["--data-dir", str(data_dir)]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_demo_export_bundle_and_offline_checks(tmp_path: Path) -> None:
    data = tmp_path / "data"
    demo = citeledger("demo", "--events", "40", data_dir=data)
    assert demo.returncode == 0, demo.stderr
    assert "verify --deep: OK" in demo.stderr + demo.stdout

    rotated = citeledger("rotate-key", data_dir=data)
    assert rotated.returncode == 0, rotated.stderr
    recorded = re.search(r"Recorded (\d+) signed entries", demo.stdout + demo.stderr)
    assert recorded is not None
    size = int(recorded.group(1)) + 2  # the genesis entry, then the demo's entries, then the rotation
    checkpoint = citeledger("checkpoint", data_dir=data)
    assert checkpoint.returncode == 0, checkpoint.stderr
    held = tmp_path / "held.note"
    held.write_text(checkpoint.stdout)
    assert checkpoint.stdout.splitlines()[1] == str(size)

    export = tmp_path / "log.jsonl"
    assert citeledger("export", "--out", str(export), data_dir=data).returncode == 0
    public_key = data / "keys" / "root.pub"
    offline = citeledger(
        "verify",
        "--export",
        str(export),
        "--public-key",
        str(public_key),
        "--deep",
        "--json",
        "--held-checkpoint",
        str(held),
    )
    assert offline.returncode == 0, offline.stderr
    summary = json.loads(offline.stdout)
    assert summary["entries"] == size and summary["signatures_checked"] == size

    bundle = tmp_path / "bundle.json"
    # The last of the demo's external retrievals (the rotation follows it).
    assert citeledger("bundle", str(size - 1), "--out", str(bundle), data_dir=data).returncode == 0
    checked = citeledger("verify-bundle", str(bundle), "--public-key", str(public_key))
    assert checked.returncode == 0, checked.stderr
    bundle.write_text(bundle.read_text().replace('"status": "ok"', '"status": "error"'))
    tampered = citeledger("verify-bundle", str(bundle), "--public-key", str(public_key))
    assert tampered.returncode == 1 and "FAILED" in tampered.stderr

    lines = export.read_text().splitlines()
    del lines[-5]
    export.write_text("\n".join(lines) + "\n")
    broken = citeledger("verify", "--export", str(export), "--public-key", str(public_key), "--json")
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["first_bad_position"] == size - 4
    # For people: one fact per line, and never "signatures checked" beside a zero.
    told = citeledger("verify", "--export", str(export), "--public-key", str(public_key))
    assert told.returncode == 1 and told.stdout.splitlines()[0].startswith(f"FAILED: position {size - 4}")


def test_demo_without_its_corpus_says_so_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-corpus"
    demo = citeledger("demo", "--corpus", str(missing), data_dir=tmp_path / "data")
    assert demo.returncode == 1
    told = (demo.stdout + demo.stderr).strip().splitlines()
    assert told == [f"the sample corpus is missing: no markdown files under {missing}"]


def test_demo_reads_a_copy_of_a_corpus_under_a_denylisted_path(tmp_path: Path) -> None:
    """A clone under /root (denylisted for sources) still runs the demo, without relaxing
    the denylist: the corpus is read from a private copy."""
    system = tmp_path / "system"
    corpus = system / "corpus"
    shutil.copytree(ROOT / "tests" / "corpus", corpus)
    demo = citeledger(
        "demo", "--corpus", str(corpus), data_dir=tmp_path / "data", CITELEDGER_SOURCES_DENYLIST=str(system)
    )
    out = demo.stdout + demo.stderr
    assert demo.returncode == 0, out[-3000:]
    assert f"{corpus} is under a denylisted system path; the demo reads a copy at" in out
    assert "229 ingested" in out and "verify --deep: OK" in out


def test_demo_on_a_corpus_that_answers_nothing_says_so_in_one_line(tmp_path: Path) -> None:
    other = tmp_path / "recipes"
    other.mkdir()
    (other / "soup.md").write_text("# Soup\n\nSimmer the onions slowly.\n")
    demo = citeledger("demo", "--corpus", str(other), data_dir=tmp_path / "data")
    assert demo.returncode == 1
    last = (demo.stdout + demo.stderr).strip().splitlines()[-1]
    assert last.startswith("the corpus does not answer the demo's English question"), last
    assert "Traceback" not in demo.stdout + demo.stderr


def test_private_key_never_printed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    demo = citeledger("demo", "--events", "5", data_dir=data)
    assert demo.returncode == 0, demo.stderr
    pem = next(
        path for path in (data / "keys").iterdir() if path.suffix == ".key" and path.name != "master.key"
    )
    secret_body = pem.read_text().split("-----")[2].strip()
    assert secret_body not in demo.stdout + demo.stderr


def test_bundle_takes_a_receipt_id_like_every_other_path(tmp_path: Path) -> None:
    """`citeledger bundle RECEIPT_ID`: the receipt's bundle with its cited documents' proofs,
    verified offline; another tenant's receipt id is not found there."""
    from ledger.config import LedgerConfig
    from ledger.writing.application import Ledger
    from tests.factories import TENANT, UseCases

    data = tmp_path / "data"
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        cases = UseCases(ledger)
        receipt_id = cases.retrieve(cases.ingest()).payload["receipt_id"]
        public_key = ledger.keydir.root_public_key_path
    out = tmp_path / "receipt-bundle.json"
    made = citeledger("bundle", receipt_id, "--tenant", TENANT, "--out", str(out), data_dir=data)
    assert made.returncode == 0, made.stderr
    document = json.loads(out.read_text())
    assert document["entry"]["payload"]["receipt_id"] == receipt_id and document["citations"]
    checked = citeledger("verify-bundle", str(out), "--public-key", str(public_key))
    assert checked.returncode == 0 and checked.stdout.startswith("OK "), checked.stdout + checked.stderr
    elsewhere = citeledger("bundle", receipt_id, "--tenant", "someone-else", data_dir=data)
    assert elsewhere.returncode == 1 and "no receipt" in elsewhere.stderr and elsewhere.stdout == ""
