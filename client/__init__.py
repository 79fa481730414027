"""citeledger's Python client: record retrievals without ever losing an audit event.

    from client import Client
    with Client("http://127.0.0.1:8080", token, spool_dir="/var/lib/svc/ledger-spool") as ledger:
        receipt = ledger.record_retrieval({"query": q, "engine": "external:my-rag", "selected_entries": hits})

Imports httpx, pydantic, `ledger.schemas` (the request and answer models, the server's own) and
`ledger.evidence.bundle` (offline bundle checks) only — never the server.

Inside: `_core/` is the sans-I/O core (requests, answers, retry and breaker decisions, spool
bookkeeping, paging); `_async/client.py` drives it over httpx and is the one source of the
client code — `_sync/client.py` is generated from it (scripts/gen_sync_client.py); `_io.py`
is what each flavour does its own way.
"""

from client._async.client import AsyncClient
from client._sync.client import Client
from client.batching import BatchRecorder
from client.errors import (
    BadResponse,
    CheckpointMismatch,
    CircuitOpen,
    IdempotencyConflict,
    LedgerError,
    NotFound,
    RateLimited,
    Refused,
    Unauthorized,
    Unavailable,
)
from client.models import BatchItemResult, RetrievalIn, RetrievalReceipt, SearchAnswer, Spooled
from client.spool import Spool
from client.verify import BundleError, verify_bundle

__all__ = [
    "AsyncClient",
    "BadResponse",
    "BatchItemResult",
    "BatchRecorder",
    "BundleError",
    "CheckpointMismatch",
    "CircuitOpen",
    "Client",
    "IdempotencyConflict",
    "LedgerError",
    "NotFound",
    "RateLimited",
    "Refused",
    "RetrievalIn",
    "RetrievalReceipt",
    "SearchAnswer",
    "Spool",
    "Spooled",
    "Unauthorized",
    "Unavailable",
    "verify_bundle",
]
