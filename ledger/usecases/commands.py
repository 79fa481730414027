"""The commands of the use cases: the request models of `ledger.schemas.requests` (the
contract), by the name the use cases, the command line, the scripts and the tests import them."""

from ledger.schemas.requests import (
    MAX_BATCH_ITEMS,
    MAX_DOCUMENT_CHARS,
    RULE_ERRORS,
    UNSAFE_PATH,
    DocumentIn,
    ErasureIn,
    IdempotencyKeyText,
    LegalHoldIn,
    PolicyBundleIn,
    RequestModel,
    RetrievalBatchIn,
    RetrievalBatchItemIn,
    RetrievalIn,
    SearchIn,
    SearchInput,
    SelectedEntryIn,
    SourceSyncIn,
    TaskIn,
)

__all__ = [
    "MAX_BATCH_ITEMS",
    "MAX_DOCUMENT_CHARS",
    "RULE_ERRORS",
    "UNSAFE_PATH",
    "DocumentIn",
    "ErasureIn",
    "IdempotencyKeyText",
    "LegalHoldIn",
    "PolicyBundleIn",
    "RequestModel",
    "RetrievalBatchIn",
    "RetrievalBatchItemIn",
    "RetrievalIn",
    "SearchIn",
    "SearchInput",
    "SelectedEntryIn",
    "SourceSyncIn",
    "TaskIn",
]
