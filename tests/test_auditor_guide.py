"""docs/auditor-guide.md, run block by block with bash against a real `citeledger serve`, as
tests/test_readme_examples.py does for the README: every command it shows works, and its
outputs are the kind the guide prints (ids, times, keys and signatures differ per run).

`WRITE_AUDITOR_GUIDE_OUTPUT=1` rewrites each block's ```text output in the guide from
this run (how the outputs in the guide were made)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ledger.config import LedgerConfig
from tests.guide_blocks import guide_blocks, script_start, write_outputs
from tests.server_process import ROOT, ServerProcess, server_env

GUIDE = ROOT / "docs" / "auditor-guide.md"
TOKEN = "guide-bootstrap-token-0123456789"
MARK = "=== guide block "


def _run(tmp_path: Path) -> list[str]:
    """Each block's stdout, in order."""
    assert shutil.which("curl") and shutil.which("jq"), "the guide needs curl and jq"
    data_dir = tmp_path / "guide-data"
    env = server_env(LedgerConfig(data_dir=data_dir), TOKEN)
    work = tmp_path / "work"
    work.mkdir()
    script = script_start(data_dir)
    for number, code in enumerate(guide_blocks(GUIDE, "guide"), start=1):
        script += [f"echo '{MARK}{number}'", code]
    script.append(f"echo '{MARK}done'")
    with ServerProcess(data_dir, env, log_path=tmp_path / "server.log") as server:
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=work,
            env={**env, "BASE": server.base_url, "TOKEN": TOKEN, "COLUMNS": "100"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    parts = done.stdout.split(MARK)
    assert parts[-1].strip() == "done"
    outputs = [part.split("\n", 1)[1] if "\n" in part else "" for part in parts[1:-1]]
    # The data dir's path is the reader's `./guide-data`, not this run's temporary one.
    return [o.replace(str(data_dir), "./guide-data").rstrip("\n") for o in outputs]


def test_the_guide_runs_against_a_real_server(tmp_path: Path) -> None:
    outputs = _run(tmp_path)
    if os.environ.get("WRITE_AUDITOR_GUIDE_OUTPUT"):
        write_outputs(GUIDE, "guide", outputs)
    setup, who, asked, http_asked, replayed, erased, log, offline, reported = outputs
    # Two sources, the same path, rules from the source and from front matter.
    assert '"retention_origin":"source"' in setup and '"sensitivity_origin":"front_matter"' in setup
    assert '"cited":["handbook:docs/a.md","wiki:docs/a.md"]' in setup
    assert who == ""
    # What was asked and cited, in plain, and the proof checked.
    assert "query: how long are audit logs kept" in asked and "Audit logs are kept for 180" in asked
    assert "proof: intact" in asked and "handbook" in asked and "restricted" in asked
    assert '"text":"how long are audit logs kept"' in http_asked and '"receipt_ids":["' in http_asked
    # Erased: recorded, unreadable with the moment, 404 on read-back, kept out of the next sync.
    assert '"reason":"erasure_request"' in erased and "[erased at" in erased
    assert "Ana Ruiz" not in erased.split("query:")[1].split("\n", 1)[1]  # the snippet is gone
    assert "404" in erased and '{"path":"docs/salary.md","status":"skipped","reason":"erased"}' in erased
    assert '"integrity":"ok"' in replayed and "integrity: ok" in replayed
    assert '"integrity":"unverifiable"' in erased and "erased_after_receipt" in erased
    # The only document it cited was erased: named by path, with the erasure's basis.
    assert '"path":"docs/salary.md"' in erased and '"basis":"erasure_request"' in erased
    assert "OK: the log you saw on " in log and "is a prefix of today's" in log
    assert "the consistency proof (" in log and "saved today's checkpoint" in log
    assert "OK entry at position" in offline and "export: partial" in offline
    # The regulator's report, issued over HTTP and checked offline with root.pub alone.
    assert '"pdf":false' in reported and "evidence" in reported and "leaves.bin" in reported
    assert "OK report of tenant default from " in reported and "figures recomputed from" in reported


def test_every_guide_block_is_taken() -> None:
    blocks = guide_blocks(GUIDE, "guide")
    assert len(blocks) == 9
    joined = "\n".join(blocks)
    for needed in ("citeledger receipts list", "citeledger receipts show", "content=plain", "/replay",
                   "citeledger replay", "citeledger check-checkpoint", "--save",
                   "citeledger verify-bundle", "verify --export", "/v1/erasures", "/v1/reports",
                   "citeledger verify-report"):  # fmt: skip
        assert needed in joined, needed
