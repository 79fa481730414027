"""A ledger written by an earlier version opens under this one (issue 26 item 8).

Every fixture under tests/fixtures/ledgers/ (made by `scripts/make_fixture_ledger.py` on the
commit it is named after) is restored on both stores, as an operator restores a backup, and
opened with the current code through the documented upgrade path (`citeledger migrate`, then
`serve`): the evidence is intact (`verify --deep`, the witness's cosignature on the newest
checkpoint), every receipt replays with the verdict it had, every idempotent retry still gets
its stored answer (`dedup: true`), and new writes append right after the last position and
verify. A later change of the layout, the storage or the entries keeps this green and adds a
fixture of its own (docs/upgrades.md)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from ledger.storage.store import LEDGER_STREAM_ID
from ledger.writing.application import Ledger
from projections.digest_sets import DigestSets
from projections.receipt_index import RECEIPTS_TABLE
from projections.runner import ProjectionRunner
from tests import loopback_http
from tests.conftest import RawStore
from tests.fixture_ledgers import (
    PG_DSN,
    STORES,
    Restored,
    erased_only,
    expected_verdict,
    fixture_versions,
    restore,
    stable,
    verdict,
)
from tests.server_process import CLI_MODULE, ROOT, ServerProcess, run_cli, server_env

UPGRADES = ROOT / "docs" / "upgrades.md"

# A bootstrap token is only made for a ledger without tokens: the fixture has its own.
UNUSED_BOOTSTRAP = "fixture-test-unused-bootstrap-000000"

# The version of the receipts read model a fixture's projection checkpoint signed (later: 2).
RECEIPTS_SIGNED = {"v4-e6af2c2": 1}


def _cli(restored: Restored, env: dict[str, str], *args: str) -> str:
    done = run_cli([*args, "--data-dir", str(restored.data_dir)], env)
    assert done.returncode == 0, (
        f"citeledger {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout + done.stderr


def _upgrade_as_documented(restored: Restored, store: str, env: dict[str, str], work: Path) -> str:
    """docs/upgrades.md's block for `store`, run with bash as an operator would."""
    blocks = dict(re.findall(r"<!-- upgrade (\w+) -->\n```sh\n(.*?)\n```", UPGRADES.read_text(), re.S))
    assert set(blocks) == set(STORES), blocks.keys()
    script = "\n".join(
        [
            "set -euo pipefail",
            f'citeledger() {{ {shlex.quote(sys.executable)} -m {CLI_MODULE} "$@"; }}',
            blocks[store],
        ]
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env={**env, "DATA_DIR": str(restored.data_dir), "SCHEMA": restored.schema or "", "PG_DSN": PG_DSN},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _verify_deep(restored: Restored, env: dict[str, str]) -> dict[str, object]:
    done = run_cli(["verify", "--deep", "--json", "--data-dir", str(restored.data_dir)], env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    report: dict[str, object] = json.loads(done.stdout)
    assert report["ok"] is True and report["first_bad_position"] is None, report
    return report


def _pre_upgrade_projection_checkpoint(
    restored: Restored, env: dict[str, str], receipts_version: int
) -> None:
    """The projection checkpoint the fixture's code signed verifies after the upgrade (the
    auditor's command), each read model matched at the version it was signed at; it stops
    verifying when a receipt row or a log payload under it changes."""
    signed = restored.manifest["projection_checkpoint"]
    done = run_cli(["verify-projections", "--data-dir", str(restored.data_dir)], env)
    report = json.loads(done.stdout.splitlines()[0])
    assert done.returncode == 0 and report["ok"] and report["checkpoint_seq"] == signed["seq"], report
    assert set(report["versions"]) == set(signed["digests"]), report
    assert report["versions"]["receipts"] == receipts_version, report

    raw = RawStore(restored.config)
    head = raw.execute(
        f"SELECT position, status FROM {RECEIPTS_TABLE} WHERE position<=? ORDER BY position LIMIT 1",
        (signed["log_size"],),
    )[0]
    with Ledger(replace(restored.config, run_checkpointer=False)) as ledger:
        checkpoints = DigestSets(ledger, ProjectionRunner(ledger.store))
        raw.execute(f"UPDATE {RECEIPTS_TABLE} SET status='tampered' WHERE position=?", (head[0],))
        assert checkpoints.verify().problems == [
            f"receipts: live read model (version 2) differs from a rebuild of the log prefix whose "
            f"version {receipts_version} matches the signed digest"
            if receipts_version != 2
            else "receipts: live read model differs from the signed digest"
        ]
        raw.execute(f"UPDATE {RECEIPTS_TABLE} SET status=? WHERE position=?", (head[1], head[0]))
        # A receipt's payload changed in the log where no other read model looks (its filters).
        stream = raw.stream_value(LEDGER_STREAM_ID)
        query = "SELECT state FROM stored_events WHERE originator_id=? AND originator_version=?"
        entry = orjson.loads(bytes(raw.execute(query, (stream, head[0]))[0][0]))
        entry["payload"]["filters_applied"] = [*entry["payload"]["filters_applied"], "tampered"]
        raw.execute(
            "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=?",
            (orjson.dumps(entry), stream, head[0]),
        )
        problems = checkpoints.verify().problems
    assert "receipts: signed digest differs from a rebuild of the log prefix" in problems, problems
    assert all(problem.startswith("receipts: ") for problem in problems), problems


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("version", fixture_versions())
def test_fixture_ledger_opens_under_this_version(version: str, store: str, tmp_path: Path) -> None:
    with restore(version, store, tmp_path) as restored:
        manifest = restored.manifest
        count = int(manifest["entry_count"])
        env = server_env(restored.config, UNUSED_BOOTSTRAP)

        work = tmp_path / "work"
        work.mkdir()
        upgraded = _upgrade_as_documented(restored, store, env, work)
        assert "schema version" in upgraded and "OK: no problem found" in upgraded, upgraded

        # The evidence as the fixture left it, read back through the migrated store: every
        # entry, every checkpoint, the key chain across the rotation, and the witness's
        # cosignature on the newest checkpoint.
        export = tmp_path / "whole-log.jsonl"
        _cli(restored, env, "export", "--out", str(export))
        witness_key = tmp_path / "witness.vkey"
        witness_key.write_text(manifest["witness"]["vkey"] + "\n", encoding="utf-8")
        cosigned = _cli(
            restored,
            env,
            "verify",
            "--export",
            str(export),
            "--public-key",
            str(restored.data_dir / "keys" / "root.pub"),
            "--witness-key",
            str(witness_key),
            "--min-witnesses",
            "1",
            "--deep",
        )
        assert manifest["witness"]["name"] in cosigned, cosigned

        with ServerProcess(restored.data_dir, env, log_path=tmp_path / "server.log") as server:
            tokens = manifest["tokens"]

            def auth(tenant: str, key: str | None = None) -> dict[str, str]:
                headers = {"Authorization": f"Bearer {tokens[tenant]}"}
                return headers if key is None else {**headers, "Idempotency-Key": key}

            with loopback_http.client(base_url=server.base_url, timeout=30) as http:
                health = http.get("/v1/healthz").json()
                assert health["integrity"]["ok"] is True, health

                # A new write goes right after the last position, signed by the rotated key.
                new = http.post(
                    "/v1/documents",
                    json={"path": "upgrade/after.md", "text": "# After\n\nWritten after the upgrade.\n"},
                    headers=auth("default", "after-upgrade-1"),
                )
                assert new.status_code == 201, new.text
                assert new.json()["position"] == count + 1

                # Every idempotent request of the fixture gets the answer it got then.
                for item in manifest["idempotent_retries"]:
                    retry = http.request(
                        item["method"],
                        item["path"],
                        json=item["body"],
                        headers=auth(item["tenant"], item["key"]),
                    )
                    assert retry.status_code == item["status"], (item["key"], retry.text)
                    assert stable(retry.json()) == item["answer"], item["key"]
                    if retry.status_code < 400:
                        assert retry.json()["dedup"] is True
                batch = manifest["batch"]
                again = http.post("/v1/retrievals/batch", json=batch["body"], headers=auth("default"))
                assert again.status_code == batch["retry"]["status"]
                assert stable(again.json()) == batch["retry"]["answer"]

                # Every receipt replays with the verdict it had.
                for receipt_id, recorded in manifest["replays"].items():
                    tenant = recorded["tenant"]
                    answer = http.post(f"/v1/receipts/{receipt_id}/replay", headers=auth(tenant))
                    expected = expected_verdict(version, store, receipt_id, recorded)
                    assert verdict(answer.status_code, answer.json()) == expected, receipt_id
                    assert erased_only(answer.json()), receipt_id

                # The question index (schema version 4) was filled from the old log when the
                # upgraded store's read models caught up: older receipts are found by their words.
                found = http.get(
                    "/v1/receipts",
                    params={"q": "external question", "content": "plain"},
                    headers=auth("default"),
                )
                assert found.status_code == 200, found.text
                questions = [r["content"]["query"] for r in found.json()["receipts"]]
                assert questions, found.text
                assert all(q["state"] != "plain" or "external question" in q["text"] for q in questions)

                # The receipts read model (schema version 5) was rebuilt from the old log: each
                # listed receipt shows what its own entries say, and is found by what it cites.
                listed = http.get(
                    "/v1/receipts", params={"limit": 500, "order": "asc"}, headers=auth("default")
                ).json()["receipts"]
                assert len(listed) >= len(manifest["replays"]) // 2, listed
                for row in listed:
                    shown = http.get(f"/v1/receipts/{row['receipt_id']}", headers=auth("default")).json()
                    cited = [c["citation_id"] for c in shown["citations"]]
                    assert (row["position"], row["citation_ids"], row["citation_count"]) == (
                        shown["position"],
                        cited,
                        len(cited),
                    )
                    assert row["task_id"] == shown["event"]["payload"]["task"].get("task_id")
                    for document_id in {c["document_id"] for c in shown["citations"]}:
                        by_document = http.get(
                            "/v1/receipts",
                            params={"document_id": document_id, "limit": 500},
                            headers=auth("default"),
                        ).json()["receipts"]
                        assert row["receipt_id"] in {r["receipt_id"] for r in by_document}

                # The held document stays held, the erased one erased.
                refused = http.post(
                    "/v1/erasures",
                    json={"document_id": manifest["held_document_id"]},
                    headers=auth("default"),
                )
                assert refused.status_code == 409, refused.text

        # The store as a whole, old entries and new (the new ones' signatures too: --deep).
        after = _verify_deep(restored, env)
        assert int(str(after["entries"])) > count + 1
        assert int(str(after["latest_checkpoint_size"])) >= count

        # Read models signed before the upgrade (docs/upgrades.md, schema version 5) still verify.
        if "projection_checkpoint" in manifest:
            _pre_upgrade_projection_checkpoint(restored, env, RECEIPTS_SIGNED.get(version, 2))
