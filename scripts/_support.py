"""What the write-path benchmarks share: the retrieval request they send and the services
one server process runs with one document ingested.

The product is imported inside the functions: bench_floor.py runs this file's callers on
another checkout's code (`--repo`), which is on `sys.path` only once its `main()` has run.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

DOC = "# Retention\n\nAudit logs are kept for 180 days.\n\n## Backups\n\nBackups are kept for 35 days.\n"


def scratch_config(backend: str, root: Path, prefix: str = "bench_") -> tuple[Any, str | None]:
    """A ledger config on a fresh SQLite directory under `root` or a fresh PostgreSQL schema
    (named, for `drop_schema`; None on SQLite)."""
    from ledger.config import LedgerConfig
    from tests.conftest import PG_DSN, pg_connect

    data_dir = root / uuid.uuid4().hex[:10]
    if backend == "sqlite":
        return LedgerConfig(data_dir=data_dir, run_checkpointer=False), None
    schema = prefix + uuid.uuid4().hex[:12]
    with pg_connect() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"{PG_DSN}?schema={schema}"
    return LedgerConfig(data_dir=data_dir, database_url=url, run_checkpointer=False), schema


def drop_schema(schema: str | None) -> None:
    if schema:
        from tests.conftest import pg_connect

        with pg_connect() as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def retrieval_body(
    doc: dict[str, Any],
    n: int,
    *,
    query: str = "how long are audit logs kept",
    task: str = "t",
    score: str = "2.5",
) -> dict[str, Any]:
    """The n-th request body citing the first chunk of `doc` (an ingest answer)."""
    return {
        "query": f"{query} {n}",
        "engine": "external:bench",
        "task": {"task_id": f"{task}-{n}"},
        "selected_entries": [
            {
                "document_id": doc["document_id"],
                "chunk_id": doc["chunks"][0]["chunk_id"],
                "score": score,
                "snippet": "Audit logs are kept for 180 days.",
            }
        ],
    }


def services_with_document(
    ledger_config: Any, tenant: str, text: str = DOC
) -> tuple[Any, Any, dict[str, Any]]:
    """(the services a server runs, a caller that may ingest and record, the answer to
    ingesting `text`) on `ledger_config`; the caller closes the services."""
    from api.config import ApiConfig
    from api.metrics import Metrics
    from api.services import Services
    from ledger.schemas.requests import DocumentIn
    from ledger.usecases.context import Caller
    from ledger.usecases.documents import ingest_document

    services = Services(ApiConfig(ledger=ledger_config), Metrics())
    caller = Caller(tenant, "bench", frozenset({"retrieval.write", "ingest.write"}))
    document = ingest_document(
        services.context, services.claims, caller, DocumentIn(path="bench.md", text=text)
    )
    return services, caller, document.body
