"""docs/operations.md, run block by block with bash against a real `citeledger serve` (SQLite)
and the real PostgreSQL server, as tests/test_auditor_guide.py does for the auditor's guide;
and the key-directory rules the guide states (issue 26, item 7), on both stores.

`WRITE_OPERATIONS_GUIDE_OUTPUT=1` rewrites each block's ```text output in the guide from this
run (how the outputs in the guide were made)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.config import LedgerConfig
from tests.conftest import PG_DSN, pg_connect
from tests.guide_blocks import block_pattern, guide_blocks, write_outputs
from tests.server_process import CLI_MODULE, ROOT, ServerProcess, free_port, run_cli, server_env

GUIDE = ROOT / "docs" / "operations.md"
TOKEN = "ops-guide-bootstrap-token-0123456789"
MARK = "=== ops block "


@pytest.fixture
def pg_scratch() -> Iterator[tuple[str, str]]:
    """A schema name and a database name for the guide's PostgreSQL blocks, dropped after."""
    schema, database = "ops_" + uuid.uuid4().hex[:12], "ops_restore_" + uuid.uuid4().hex[:12]
    yield schema, database
    with pg_connect() as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _run(tmp_path: Path, schema: str, database: str) -> list[str]:
    """Each block's stdout, in order."""
    for tool in ("curl", "jq", "psql", "pg_dump", "pg_restore"):
        assert shutil.which(tool), f"the operations guide needs {tool}"
    data_dir = tmp_path / "citeledger-data"
    env = server_env(LedgerConfig(data_dir=data_dir), TOKEN)
    work = tmp_path / "work"
    work.mkdir()
    # A real `citeledger` on the PATH (not a shell function): `citeledger serve &` then gives
    # the server's own pid to `kill`, as it does for a reader.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "citeledger"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {CLI_MODULE} "$@"\n')
    wrapper.chmod(0o755)
    ports = {"8001": str(free_port()), "8002": str(free_port())}
    script = ["set -euo pipefail", f"export DATA_DIR={shlex.quote(str(data_dir))}"]
    for number, code in enumerate(guide_blocks(GUIDE, "ops"), start=1):
        for fixed, port in ports.items():
            code = code.replace(f"127.0.0.1:{fixed}", f"127.0.0.1:{port}")
            code = code.replace(f"--port {fixed}", f"--port {port}")
        script += [f"echo '{MARK}{number}'", code]
    script.append(f"echo '{MARK}done'")
    run_env = {
        **env,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "TOKEN": TOKEN,
        "CITELEDGER_BOOTSTRAP_TOKEN": TOKEN,
        "PGURL": PG_DSN,
        "PGSCHEMA": schema,
        "RESTORE_DB": database,
        "COLUMNS": "100",
    }
    with ServerProcess(data_dir, env, log_path=tmp_path / "server.log") as server:
        process = subprocess.Popen(
            ["bash", "-c", "\n".join(script)],
            cwd=work,
            env={**run_env, "BASE": server.base_url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # the servers the guide starts are in this group
        )
        try:
            stdout, stderr = process.communicate(timeout=300)
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # whatever a failed block left running
            except ProcessLookupError:
                pass
    (tmp_path / "guide.sh").write_text("\n".join(script))  # what ran, for a failure's reader
    (tmp_path / "guide.out").write_text(stdout + "\n--- stderr\n" + stderr)
    assert process.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}\n(all of it: {tmp_path}/guide.out)"
    parts = stdout.split(MARK)
    assert parts[-1].strip() == "done"
    outputs = [part.split("\n", 1)[1] if "\n" in part else "" for part in parts[1:-1]]
    texts = [o.replace(str(data_dir), "./citeledger-data").rstrip("\n") for o in outputs]
    for fixed, port in ports.items():  # the reader's ports, not this run's
        texts = [t.replace(f"127.0.0.1:{port}", f"127.0.0.1:{fixed}") for t in texts]
    return [t.replace(schema, "citeledger") for t in texts]


def test_the_guide_runs_against_real_servers(tmp_path: Path, pg_scratch: tuple[str, str]) -> None:
    outputs = _run(tmp_path, *pg_scratch)
    if os.environ.get("WRITE_OPERATIONS_GUIDE_OUTPUT"):
        write_outputs(GUIDE, "ops", outputs)
    seeded, backup, restored, pg_serve, pg_dump, pg_restored, master, rotated, proxy, lag = outputs
    assert seeded == ""
    # The SQLite backup under 30 concurrent writes is a data directory verify --deep accepts,
    # and its master key reads the sealed text back.
    assert "store: ledger.sqlite, online backup" in backup and "master.key" in backup
    assert "OK: no problem found" in restored and "Audit logs are kept for 180 days." in restored
    copied = re.search(r"entries read: (\d+)", restored)
    assert copied and int(copied.group(1)) >= 3  # genesis, the document, the first receipt
    # ... and is one snapshot taken while the writes went on: they continued past it.
    later = re.search(r"entries read: (\d+)", rotated)
    assert later and int(later.group(1)) > int(copied.group(1)) + 2
    # PostgreSQL: pg_dump + the keys, restored into a scratch database, verify --deep accepts it.
    assert '"document_id"' in pg_serve
    assert "not copied: take it with pg_dump" in pg_dump
    assert "OK: no problem found" in pg_restored and "entry signatures checked" in pg_restored
    # Without master.key: signatures verify, serve refuses (exit 2) naming the file.
    assert master.startswith("OK: no problem found") and "serve refused: exit 2" in master
    assert "master.key: missing" in master and "restore master.key from a backup" in master
    # Rotation: the next receipt is signed by the new key; the old private key is retired.
    new_kid = re.search(r"the next receipt is signed by ([0-9a-f]{16})", rotated)
    retired = re.search(r"retired ([0-9a-f]{16})", rotated)
    assert new_kid and retired and f"signing key in force: {new_kid.group(1)}" in rotated
    assert f"{retired.group(1)}.pub" in rotated and f"{retired.group(1)}.key" not in rotated
    assert f"{new_kid.group(1)}.key" in rotated and "OK: no problem found" in rotated
    # The Secure cookie follows X-Forwarded-Proto from a trusted proxy address only.
    trusted, no_proto, untrusted, plain = proxy.split("HTTP/1.1 ")[1:]
    assert trusted.startswith("303") and "; Secure" in trusted
    assert no_proto.startswith("403") and "set-cookie" not in no_proto.lower()
    assert untrusted.startswith("403") and "set-cookie" not in untrusted.lower()
    assert plain.startswith("303") and "set-cookie" in plain.lower() and "Secure" not in plain
    # Without a server or worker the rotation entry is unapplied; the worker catches it up.
    assert lag.splitlines() == ['{"ok":true,"lag":[1]}', '{"ok":true,"lag":[0]}']


def test_every_guide_block_is_taken() -> None:
    blocks = guide_blocks(GUIDE, "ops")
    # The set-up block is the reader's; the test provides what it exports (`_run`).
    setup = block_pattern("ops").findall(GUIDE.read_text(encoding="utf-8"))[0][1]
    exported = ("DATA_DIR", "TOKEN", "CITELEDGER_BOOTSTRAP_TOKEN", "BASE", "PGURL", "PGSCHEMA", "RESTORE_DB")
    for name in exported:
        assert re.search(rf"^export (.* )?{name}=", setup, re.M), name
    assert len(blocks) == 10
    joined = "\n".join(blocks)
    for needed in ("citeledger backup", "verify --deep", "pg_dump", "pg_restore", "master.key",
                   "citeledger rotate-key", "citeledger retire-keys", "X-Forwarded-Proto",
                   "FORWARDED_ALLOW_IPS", "citeledger project", "citeledger lag"):  # fmt: skip
        assert needed in joined, needed
    text = GUIDE.read_text(encoding="utf-8")
    assert "docs/upgrades.md" in text
    assert "docs/operations.md" in (ROOT / "README.md").read_text(encoding="utf-8")


# -- the key directory, on both stores ------------------------------------------------------


def _cli(config: LedgerConfig, *args: str) -> subprocess.CompletedProcess[str]:
    env = server_env(config, TOKEN)
    return run_cli([*args, "--data-dir", str(config.data_dir)], env)


def _entries(config: LedgerConfig, tmp_path: Path) -> list[dict[str, object]]:
    out = tmp_path / "log.jsonl"
    assert _cli(config, "export", "--out", str(out)).returncode == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return [line["entry"] if "entry" in line else line for line in lines]


def test_rotate_key_names_the_new_key_and_the_old_one_retires(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    """After rotate-key: keys/active names the new key (it named the old one before this
    fix), the new key signs, the old private key can be deleted with retire-keys and
    everything still verifies and keeps writing."""
    assert _cli(ledger_config, "init").returncode == 0
    keys = ledger_config.data_dir / "keys"
    old = (keys / "active").read_text().strip()
    rotated = _cli(ledger_config, "rotate-key")
    assert rotated.returncode == 0, rotated.stderr
    new = re.search(r"new signing key ([0-9a-f]{16})", rotated.stdout + rotated.stderr)
    assert new is not None and new.group(1) != old
    assert (keys / "active").read_text().strip() == new.group(1)
    assert (keys / "active").stat().st_mode & 0o777 == 0o600

    retired = _cli(ledger_config, "retire-keys")
    assert retired.returncode == 0, retired.stderr
    assert f"retired {old}" in retired.stdout and f"signing key in force: {new.group(1)}" in retired.stdout
    assert not (keys / f"{old}.key").exists() and (keys / f"{old}.pub").exists()
    assert (keys / f"{new.group(1)}.key").exists()

    # Without the old private key the ledger opens, signs (a second rotation is signed by the
    # key in force) and checkpoints; every signature verifies.
    second = _cli(ledger_config, "rotate-key")
    assert second.returncode == 0, second.stderr
    assert _cli(ledger_config, "checkpoint").returncode == 0
    verified = _cli(ledger_config, "verify", "--deep")
    assert verified.returncode == 0 and "OK: no problem found" in verified.stdout, verified.stdout
    entries = [e for e in _entries(ledger_config, tmp_path) if isinstance(e, dict) and "kid" in e]
    assert [e["kid"] for e in entries][:3] == [old, old, new.group(1)]


def test_a_missing_master_key_is_refused_never_replaced(ledger_config: LedgerConfig) -> None:
    """A ledger's key directory without master.key: commands that open the ledger stop with
    one line (exit 2) instead of making a new master key that opens none of the stored data
    keys (before: a new one was written and every sealed read answered 500)."""
    assert _cli(ledger_config, "init").returncode == 0
    master = ledger_config.data_dir / "keys" / "master.key"
    master.unlink()
    refused = _cli(ledger_config, "checkpoint")
    assert refused.returncode == 2, refused.stderr
    assert "master.key: missing" in refused.stderr and "Traceback" not in refused.stderr
    assert not master.exists()
    verified = _cli(ledger_config, "verify", "--deep")  # signatures need no master key
    assert verified.returncode == 0, verified.stderr


def test_backup_refuses_a_used_or_nested_target(tmp_path: Path) -> None:
    config = LedgerConfig(data_dir=tmp_path / "data")
    assert _cli(config, "init").returncode == 0
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("x")
    for target in (used, config.data_dir / "inside", tmp_path / "missing" / "out"):
        refused = _cli(config, "backup", "--out", str(target))
        assert refused.returncode == 2 and refused.stderr.startswith("error: "), refused.stderr
    assert (used / "x").read_text() == "x" and not (config.data_dir / "inside").exists()
