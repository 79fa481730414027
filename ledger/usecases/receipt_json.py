"""A recorded retrieval's receipt as its JSON form (`ledger.domain.payloads.PlainPayload`), built
from the validated request and the ledger's own records without building its models.

A batch records up to 500 receipts per call; building each receipt's pydantic models (the
receipt, its task, policy, entries, locators, spans, score parts) and dumping them again cost
about a tenth of its CPU (issue 28). Every value here has passed a rule at least as strict as
the event model's already: the request model's (`ledger.schemas.requests`: ids, the engine,
scores, statuses, bounds), the ledger's own records (chunks, policies, sealed values), or the
values the use case computed (citation ids, spans, expiry timestamps). The few that come from
elsewhere (the caller's trace id and scopes, an OTLP span's data source) are checked against
the model's rule here, and anything off is handed to the model, which refuses it as before.
`tests/test_plain_receipt.py` holds the bytes equal to the model's for every field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from ledger.domain.events import PolicySnapshot, Sealed, UnverifiedCitation
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_AUTH_SCOPES
from ledger.domain.payloads import PlainPayload
from ledger.schemas.requests import RetrievalIn, SelectedEntryIn
from ledger.usecases.ports import ChunkState

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)


def sealed_json(value: Sealed) -> dict[str, Any]:
    """A sealed value's JSON form: its fields are plain strings and a list of strings, held
    in the model's `__dict__` (pydantic keeps extras apart), so a copy is `model_dump(mode="json")`."""
    return dict(value.__dict__)


def entry_json(
    chunk: ChunkState,
    selected: SelectedEntryIn,
    *,
    snapshot: Sealed,
    explanation: Sealed | None,
    span: tuple[int, int],
    expires_at: str,
) -> dict[str, Any]:
    """One selected entry as `SelectedEntry` dumps it, with a fresh citation id (minted after
    its texts are sealed), `source` and `score` left out when None (`ENTRY_OMIT_WHEN_NONE`)."""
    entry: dict[str, Any] = {
        "citation_id": os.urandom(16).hex(),
        "document_id": chunk.document_id,
        "version_id": chunk.version_id,
        "chunk_id": chunk.chunk_id,
        "path": chunk.path,
        "locator": {"start_line": chunk.start_line, "end_line": chunk.end_line, "heading_path": None},
        "score_breakdown": [{"component": c.component, "value": c.value} for c in selected.score_breakdown],
        "explanation": sealed_json(explanation) if explanation is not None else None,
        "snapshot": sealed_json(snapshot),
        "snippet_span": {"start": span[0], "end": span[1]},
        "sensitivity": chunk.sensitivity,
        "expires_at": expires_at,
    }
    if chunk.source is not None:
        entry["source"] = chunk.source
    if selected.score is not None:
        entry["score"] = selected.score
    return entry


def policy_json(snapshot: PolicySnapshot) -> dict[str, Any]:
    """The frozen policy's JSON form (once per batch: its receipts share it)."""
    return snapshot.model_dump(mode="json")


def receipt_payload(
    *,
    receipt_id: str,
    query: Sealed,
    body: RetrievalIn,
    trace_id: str | None,
    auth_scope: list[str],
    policy: dict[str, Any],
    entries: list[dict[str, Any]],
    context_hash: str,
    unverifiable: Sequence[UnverifiedCitation],
    data_source: str | None,
) -> PlainPayload:
    """The `RetrievalRecorded` of a recorded retrieval, as `payload_to_json` returns it."""
    receipt: dict[str, Any] = {
        "receipt_id": receipt_id,
        "query": sealed_json(query),
        "subject_id": body.subject_id,
        "task": {
            "trace_id": trace_id,
            "task_id": body.task.task_id,
            "deadline_ms": body.task.deadline_ms,
            "auth_scope": auth_scope,
        },
        "engine": body.engine,
        "mode": "live",
        "parent_receipt_id": None,
        "policy_snapshot": policy,
        "selected_entries": entries,
        "filters_applied": [
            {"rule_id": f.rule_id, "chunk_id": f.chunk_id, "action": f.action} for f in body.filters_applied
        ],
        "context_hash": context_hash,
        "status": body.status,
        "data_source": data_source,
    }
    if unverifiable:
        receipt["unverifiable"] = [each.model_dump(mode="json") for each in unverifiable]
    payload = PlainPayload("RetrievalRecorded", receipt)
    if not _checked_here(trace_id, auth_scope, data_source):
        payload.model()  # raises as building the model did (a value the request model never saw)
    return payload


def _checked_here(trace_id: str | None, auth_scope: list[str], data_source: str | None) -> bool:
    """The receipt's values that no request model checked, against the event model's rules."""
    return (
        (trace_id is None or _IDENTIFIER.fullmatch(trace_id) is not None)
        and (data_source is None or _IDENTIFIER.fullmatch(data_source) is not None)
        and len(auth_scope) <= MAX_AUTH_SCOPES
        and all(_IDENTIFIER.fullmatch(scope) is not None for scope in auth_scope)
    )
