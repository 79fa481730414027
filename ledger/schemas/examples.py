"""One example per request body, by the model's component name: the OpenAPI document puts
each beside its schema and request body (Swagger UI shows them; schemathesis starts from
them). `DocumentUpload` and `TokenIn` are the API's own forms, documented the same way."""

from __future__ import annotations

from typing import Any

_DOC_TEXT = "# Retention\n\nAudit logs are kept for 180 days.\n"
REQUEST_EXAMPLES: dict[str, dict[str, Any]] = {
    "DocumentIn": {
        "path": "handbook/retention.md",
        "text": _DOC_TEXT,
        "title": "Retention",
        "sensitivity": "internal",
        "retention_days": 365,
    },
    "DocumentUpload": {"file": _DOC_TEXT, "path": "handbook/retention.md", "sensitivity": "internal"},
    "TokenIn": {"tenant": "acme", "scopes": ["audit.read"], "expires_in": "30d"},
    "RetrievalIn": {
        "query": "how long are audit logs kept?",
        "engine": "external:my-rag",
        "task": {"task_id": "task-1", "deadline_ms": 1500},
        "selected_entries": [
            {
                "document_id": "doc-retention",
                "chunk_id": "doc-retention.c0001",
                "score": "3.25",
                "snippet": "Audit logs are kept for 180 days.",
            }
        ],
    },
    "RetrievalBatchIn": {
        "items": [
            {
                "idempotency_key": "svc-7f3a-0001",
                "retrieval": {
                    "query": "how long are audit logs kept?",
                    "engine": "external:my-rag",
                    "selected_entries": [],
                    "status": "no_hit",
                },
            }
        ]
    },
    "SearchIn": {
        "trace_id": "trace-7f3a",
        "task_id": "task-1",
        "deadline_ms": 3000,
        "auth_scope": ["retrieval.write"],
        "idempotency_key": "search-7f3a-1",
        "input": {"query": "how long are audit logs kept?", "target_roots": ["handbook"], "top_k": 5},
    },
    "PolicyBundleIn": {
        "bundle_yaml": "version: 1\nrules:\n  - id: deny-restricted\n    action: deny\n",
        "policy_version": "2026-05-01",
    },
    "ErasureIn": {"subject_id": "subject-42"},
    "ReportIn": {"from": "2026-07-01", "to": "2026-10-01"},
    "SourceSyncIn": {"under": "handbook"},
    "LegalHoldIn": {
        "document_ids": ["doc-retention"],
        "legal_basis": "Litigation 2026-17, counsel's request",
    },
}
