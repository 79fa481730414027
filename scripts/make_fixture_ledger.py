"""Build a fixture ledger with the product's own commands, for tests/test_fixture_ledgers.py.

Run it on the commit whose storage the fixture should freeze (it names the directory after
that commit):

    .venv/bin/python scripts/make_fixture_ledger.py --label v1

It writes `tests/fixtures/ledgers/<label>-<commit>/` with, for each store:

- `sqlite/data/`: the data directory (`ledger.sqlite`, `keys/`, `tokens.json`) after a
  clean stop;
- `postgres/dump.sql` (plain `pg_dump` of the schema the script created; the schema name
  is `SCHEMA_TOKEN`, which the test replaces by a fresh one) and `postgres/data/` (the keys
  and tokens that go with it);
- `<store>/manifest.json`: the tokens used (test-only secrets), every receipt with the
  verdict its replay got, every idempotent request (key, route, body) with the answer a
  retry got after all the writes, the log size, the newest checkpoint and the projection
  checkpoint (signed read-model digests) issued before the replays.

Everything is made through a real `citeledger serve` over HTTP and the `citeledger` command
line (init, tokens create, rotate-key, checkpoint, projection-checkpoint, witness
init/add-log/serve): no store is
written directly, so the fixture is exactly what that version's users would have on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.config import LedgerConfig  # noqa: E402
from tests.fixture_ledgers import stable, verdict  # noqa: E402 - the readers of what this records
from tests.server_process import ServerProcess, run_cli, server_env  # noqa: E402
from tests.witness_support import WitnessProcess  # noqa: E402

PG_DSN = os.environ.get("CITELEDGER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
# A name that occurs nowhere else in a dump (every text field is sealed), so the test can
# restore the dump into a fresh schema by replacing it.
SCHEMA_TOKEN = "citeledger_fixture_schema"
BOOTSTRAP = "fixture-bootstrap-token-not-a-secret-0001"
WITNESS_NAME = "fixture.example/w1"
# Far beyond any test run: no citation of the fixture expires, so replay verdicts stay put.
RETENTION_DAYS = 36_500

DOCUMENTS: list[dict[str, Any]] = [
    {
        "path": "handbook/retention.md",
        "text": "# Retention\n\nAudit logs are kept for 180 days.\n\n## Backups\n\n"
        "Backups of the audit store are encrypted and kept for 35 days.\n",
        "sensitivity": "internal",
    },
    {
        "path": "handbook/erase-me.md",
        "text": "# Incident notes\n\nThe incident review names the on-call engineer and the pager rota.\n",
        "sensitivity": "internal",
    },
    {
        "path": "zh/保留政策.md",
        "text": "# 保留政策\n\n审计日志保留一百八十天。备份加密保存。\n",
        "sensitivity": "public",
        "title": "保留政策",
    },
    {
        "path": "ja/監査ログ.md",
        "text": "# 監査ログ\n\n監査ログは百八十日間保存されます。バックアップは暗号化されます。\n",
        "sensitivity": "public",
    },
    {
        "path": "finance/salaries.md",
        "text": "# Salaries\n\nSalary bands are reviewed every year in March.\n",
        "sensitivity": "restricted",
    },
]

POLICY = """\
version: 1
rules:
  - id: handbook-first
    action: boost
    factor: "1.5"
    match: {paths: ["handbook/**"]}
  - id: no-finance
    action: deny
    match: {paths: ["finance/**"]}
    unless_scope: knowledge.restricted.read
"""


class Maker:
    """One fixture ledger on one store, built through a running server."""

    def __init__(self, work: Path, store: str) -> None:
        self.work = work
        self.store = store
        self.data_dir = work / "data"
        self.schema = SCHEMA_TOKEN
        url = f"{PG_DSN}?schema={self.schema}" if store == "postgres" else None
        self.config = LedgerConfig(data_dir=self.data_dir, database_url=url)
        self.env = server_env(
            self.config,
            BOOTSTRAP,
            CITELEDGER_CHECKPOINT_INTERVAL_S="0.2",
            CITELEDGER_RETENTION_INTERVAL_S="0",
        )
        self.tokens: dict[str, str] = {"default": BOOTSTRAP}
        self.idempotent: list[dict[str, Any]] = []
        self.receipts: list[str] = []
        self.notes: dict[str, Any] = {}

    # -- helpers -------------------------------------------------------------------
    def cli(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = run_cli([*args, "--data-dir", str(self.data_dir)], env or self.env)
        if done.returncode != 0:
            raise RuntimeError(f"citeledger {' '.join(args)}: {done.returncode} {done.stderr}")
        return done.stdout.strip()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        tenant: str = "default",
        key: str | None = None,
        expect: tuple[int, ...] = (200, 201),
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.tokens[tenant]}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        answer = self.http.request(method, path, json=body, headers=headers)
        if answer.status_code not in expect:
            raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:500]}")
        data: dict[str, Any] = answer.json()
        if key is not None:
            self.idempotent.append(
                {"tenant": tenant, "method": method, "path": path, "key": key, "body": body}
            )
        return data

    def document(
        self, doc: dict[str, Any], *, tenant: str = "default", key: str | None = None
    ) -> dict[str, Any]:
        return self.call(
            "POST", "/v1/documents", {**doc, "retention_days": RETENTION_DAYS}, tenant=tenant, key=key
        )

    def search(self, query: str, *, tenant: str = "default", key: str | None = None, **extra: Any) -> str:
        body = {
            "task_id": f"fixture-{len(self.receipts)}",
            "deadline_ms": 5000,
            "input": {"query": query, "top_k": 3, **extra},
        }
        answer = self.call("POST", "/v1/search", body, tenant=tenant, key=key)
        self.receipts.append(answer["receipt_id"])
        return str(answer["receipt_id"])

    def retrieval(
        self, doc: dict[str, Any], snippet: str, *, key: str, tenant: str = "default", **extra: Any
    ) -> dict[str, Any]:
        chunk = doc["chunks"][0]["chunk_id"]
        body = {
            "query": f"external question {len(self.receipts)}",
            "engine": "external:fixture-rag",
            "task": {"task_id": f"ext-{len(self.receipts)}", "deadline_ms": 1500},
            "selected_entries": [
                {
                    "document_id": doc["document_id"],
                    "chunk_id": chunk,
                    "score": "3.25",
                    "score_breakdown": [{"component": "bm25", "value": "2.5"}],
                    "snippet": snippet,
                }
            ],
            **extra,
        }
        answer = self.call("POST", "/v1/retrievals", body, tenant=tenant, key=key)
        self.receipts.append(answer["receipt_id"])
        return answer

    def replay(self, receipt_id: str, tenant: str = "default") -> dict[str, Any]:
        """The verdict a replay of `receipt_id` gets (the replay is recorded, as always)."""
        answer = self.http.post(
            f"/v1/receipts/{receipt_id}/replay", headers={"Authorization": f"Bearer {self.tokens[tenant]}"}
        )
        return {"tenant": tenant, **verdict(answer.status_code, answer.json())}

    # -- the story -----------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        if self.store == "postgres":
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
                conn.execute(f'CREATE SCHEMA "{self.schema}"')
        self.cli("init")
        witness = WitnessProcess(self.work / "witness", WITNESS_NAME, self.cli("vkey"))
        with witness:
            self.env["CITELEDGER_WITNESSES"] = witness.setting
            self._before_rotation()
            self.cli("rotate-key")
            # The witness follows the log's checkpoint key: a rotation needs it told again.
            added = run_cli(
                ["witness", "add-log", "--dir", str(witness.directory), self.cli("vkey")], self.env
            )
            assert added.returncode == 0, added.stderr
            self._after_rotation()
        self.notes["witness_vkey"] = witness.vkey
        return self.manifest()

    def _server(self) -> ServerProcess:
        return ServerProcess(self.data_dir, self.env, log_path=self.work / "server.log")

    def _before_rotation(self) -> None:
        with self._server() as server, httpx.Client(base_url=server.base_url, timeout=30) as self.http:
            # After the first start, which made the bootstrap token; the server re-reads
            # tokens.json within a second.
            self.tokens["acme"] = self.cli(
                "tokens",
                "create",
                "--tenant",
                "acme",
                "--scopes",
                "ingest.write,retrieval.write,audit.read,replay.run,admin",
            )
            time.sleep(1.2)
            docs = [self.document(doc, key=f"doc-{n}" if n == 0 else None) for n, doc in enumerate(DOCUMENTS)]
            self.docs = docs
            acme = self.document(
                {
                    "path": "acme/notes.md",
                    "text": "# Acme\n\nAcme keeps its audit logs for two years.\n",
                    "sensitivity": "internal",
                },
                tenant="acme",
                key="acme-doc-1",
            )
            self.search("how long are audit logs kept?", key="search-en-1")
            self.search("审计日志保留多久")
            self.search("監査ログの保存期間")
            self.search("incident review on-call engineer")
            self.search("salary bands")  # restricted: withheld without the scope's policy exemption
            self.retrieval(docs[0], "Audit logs are kept for 180 days.", key="retrieval-1")
            self.retrieval(docs[1], "names the on-call engineer", key="retrieval-erased")
            self.retrieval(docs[2], "审计日志保留一百八十天。", key="retrieval-zh", subject_id="subject-7")
            self.retrieval(acme, "two years", key="acme-retrieval-1", tenant="acme")
            batch = {
                "items": [
                    {
                        "idempotency_key": "batch-item-1",
                        "retrieval": {
                            "query": "batch question",
                            "engine": "external:fixture-rag",
                            "selected_entries": [
                                {
                                    "document_id": docs[3]["document_id"],
                                    "chunk_id": docs[3]["chunks"][0]["chunk_id"],
                                    "score": "1.5",
                                    "snippet": "監査ログは百八十日間保存されます。",
                                }
                            ],
                        },
                    }
                ]
            }
            batched = self.call("POST", "/v1/retrievals/batch", batch)
            self.notes["batch"] = {"body": batch, "answer": batched}
            self.receipts.extend(
                str(item["receipt_id"]) for item in batched.get("results", []) if item.get("receipt_id")
            )
            self.call("POST", "/v1/policy-bundles", {"bundle_yaml": POLICY, "policy_version": "fixture-1"})
            self.search("how long are audit logs kept?", key="search-en-policy")
            self.search("salary bands")
            hold = self.call(
                "POST",
                "/v1/legal-holds",
                {"document_ids": [docs[0]["document_id"]], "legal_basis": "fixture litigation hold"},
            )
            self.notes["hold_id"] = hold.get("hold_id")
            # A held document is not erased (409, nothing written); the other one is.
            self.call("POST", "/v1/erasures", {"document_id": docs[0]["document_id"]}, expect=(409,))
            self.call("POST", "/v1/erasures", {"document_id": docs[1]["document_id"]})
            self.call("POST", "/v1/erasures", {"subject_id": "subject-7"})
            for receipt_id in list(self.receipts[:4]):
                self.replay(receipt_id)

    def _after_rotation(self) -> None:
        with self._server() as server, httpx.Client(base_url=server.base_url, timeout=30) as self.http:
            late = self.document(
                {
                    "path": "handbook/late.md",
                    "text": "# Late\n\nWritten after the key rotation.\n",
                    "sensitivity": "public",
                },
                key="doc-late",
            )
            self.search("written after the key rotation", key="search-late")
            self.retrieval(late, "Written after the key rotation.", key="retrieval-late")
            # A receipt too large for one entry (RetrievalContinued parts, each adding citations
            # and filters), which read models merge back into one receipt.
            lines = [f"part {i} " + "\U0001f600" * 7_000 for i in range(4)]
            long = self.document({"path": "handbook/long.md", "text": "\n\n".join(lines) + "\n"})
            chunks = [c["chunk_id"] for c in long["chunks"]]
            self.retrieval(
                long,
                "",
                key="retrieval-parts",
                selected_entries=[
                    {"document_id": long["document_id"], "chunk_id": chunk, "score": "1", "snippet": line}
                    for chunk, line in zip(chunks, lines, strict=True)
                ],
                filters_applied=[
                    {"chunk_id": chunk, "rule_id": f"rule-{i}", "action": "boost"}
                    for i, chunk in enumerate(chunks[:2])
                ],
            )
            self.cli("checkpoint")
            self._wait_cosigned()
            # Read models signed as this version digests them, over a prefix that later entries
            # (the replays) extend: an upgrade that changes a read model must keep it verifiable.
            self.notes["projection_checkpoint"] = json.loads(self.cli("projection-checkpoint"))
            # Every receipt's verdict (replays of replays included: refused as nested).
            verdicts: dict[str, Any] = {}
            for tenant, receipt_id in self._all_receipts():
                verdicts[receipt_id] = self.replay(receipt_id, tenant)
            self.notes["replays"] = verdicts
            # What each idempotent request answers when retried after all of it.
            for item in self.idempotent:
                headers = {
                    "Authorization": f"Bearer {self.tokens[item['tenant']]}",
                    "Idempotency-Key": item["key"],
                }
                retry = self.http.request(item["method"], item["path"], json=item["body"], headers=headers)
                item["status"] = retry.status_code
                item["answer"] = stable(retry.json())
            batch = self.http.post(
                "/v1/retrievals/batch",
                json=self.notes["batch"]["body"],
                headers={"Authorization": f"Bearer {BOOTSTRAP}"},
            )
            self.notes["batch"]["retry"] = {"status": batch.status_code, "answer": stable(batch.json())}
            self.cli("checkpoint")
            self._wait_cosigned()
            latest = self.http.get(
                "/v1/checkpoints/latest", headers={"Authorization": f"Bearer {BOOTSTRAP}"}
            ).json()
            self.notes["checkpoint"] = stable(latest)
            self.notes["entry_count"] = self._log_size()
            health = self.http.get("/v1/healthz").json()
            assert health.get("integrity", {}).get("ok", True), health

    def _wait_cosigned(self, timeout: float = 20) -> None:
        """Until the newest checkpoint carries the witness's cosignature."""
        deadline = time.monotonic() + timeout
        log_size = self._log_size()
        while time.monotonic() < deadline:
            note = self.http.get("/v1/tlog/checkpoint").text
            size = int(note.splitlines()[1])
            if f"— {WITNESS_NAME} " in note and size >= log_size:
                return
            time.sleep(0.2)
        raise RuntimeError("the witness did not cosign the newest checkpoint")

    def _log_size(self) -> int:
        """The log's size: the next position a write gets (`citeledger verify --json`)."""
        report = json.loads(self.cli("verify", "--json"))
        return int(report["entries"])

    def _all_receipts(self) -> list[tuple[str, str]]:
        """(tenant, receipt id) of every receipt, as each tenant lists its own."""
        found: list[tuple[str, str]] = []
        for tenant in self.tokens:
            cursor: str | None = None
            while True:
                params: dict[str, Any] = {"limit": 100, "order": "asc"}
                if cursor:
                    params["cursor"] = cursor
                page = self.http.get(
                    "/v1/receipts", params=params, headers={"Authorization": f"Bearer {self.tokens[tenant]}"}
                ).json()
                found.extend((tenant, str(r["receipt_id"])) for r in page["receipts"])
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        return found

    def manifest(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "made_with": commit(),
            "made_at": time.time(),
            "tokens": self.tokens,
            "schema_token": SCHEMA_TOKEN if self.store == "postgres" else None,
            "witness": {"name": WITNESS_NAME, "vkey": self.notes["witness_vkey"]},
            # Where this layout keeps idempotency records and their age (epoch seconds): the
            # server forgets records older than 24 h, so the test ages them as if the upgrade
            # ran within that window.
            "idempotency": {"table": "citeledger_idempotency", "created_at": "created_at"},
            "documents": [
                {"path": doc["path"], "document_id": made["document_id"]}
                for doc, made in zip(DOCUMENTS, self.docs, strict=True)
            ],
            "held_document_id": self.docs[0]["document_id"],
            "erased_document_id": self.docs[1]["document_id"],
            "replays": self.notes["replays"],
            "idempotent_retries": self.idempotent,
            "batch": self.notes["batch"],
            "checkpoint": self.notes["checkpoint"],
            "projection_checkpoint": self.notes["projection_checkpoint"],
            "entry_count": self.notes["entry_count"],
        }


def commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def copy_data_dir(source: Path, target: Path, *, with_sqlite: bool) -> None:
    """The data directory as a user would back it up after a clean stop (no WAL left)."""
    target.mkdir(parents=True)
    if with_sqlite:
        database = source / "ledger.sqlite"
        with sqlite3.connect(database) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copy2(database, target / "ledger.sqlite")
    shutil.copytree(source / "keys", target / "keys")
    shutil.copy2(source / "tokens.json", target / "tokens.json")


def dump_schema(target: Path) -> None:
    done = subprocess.run(
        ["pg_dump", "--no-owner", "--no-privileges", "--schema", SCHEMA_TOKEN, PG_DSN],
        capture_output=True,
        text=True,
        check=True,
    )
    target.write_text(done.stdout, encoding="utf-8")
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA_TOKEN}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--label", default="v1", help="the storage version this fixture freezes")
    parser.add_argument(
        "--out", type=Path, default=None, help="default tests/fixtures/ledgers/<label>-<commit>"
    )
    parser.add_argument("--stores", default="sqlite,postgres")
    args = parser.parse_args()
    out: Path = args.out or ROOT / "tests" / "fixtures" / "ledgers" / f"{args.label}-{commit()}"
    for store in args.stores.split(","):
        target = out / store
        if target.exists():
            shutil.rmtree(target)
        with tempfile.TemporaryDirectory(prefix=f"fixture-{store}-") as tmp:
            maker = Maker(Path(tmp), store)
            manifest = maker.build()
            copy_data_dir(maker.data_dir, target / "data", with_sqlite=store == "sqlite")
            if store == "postgres":
                dump_schema(target / "dump.sql")
            (target / "manifest.json").write_text(
                json.dumps(manifest, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8"
            )
        print(f"{store}: {manifest['entry_count']} entries, {len(manifest['replays'])} receipts -> {target}")


if __name__ == "__main__":
    main()
