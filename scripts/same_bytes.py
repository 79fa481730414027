"""The write path's bytes on two checkouts, compared (issue 28): records a fixed set of batch
items and single retrievals with the randomness and the clock made deterministic, on the code of
`--repo`, and prints one SHA-256 over every log entry's bytes and every answer (status, body,
refusal). Run it on this branch and on a base checkout: equal digests mean the same stored bytes
and the same answers for the same input (entries, signatures, chain, a receipt split over several
entries, dedup replays, refusals naming their field). The two sides must make their random draws
in the same order (ids and nonces are drawn from one seeded stream).

    python scripts/same_bytes.py --repo . --out /tmp/new.txt [--backend postgres]
    python scripts/same_bytes.py --repo /work/wt/base-main --out /tmp/base.txt
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

_rng = random.Random(28)
_tick = [dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC)]


class _Clock(dt.datetime):
    """A clock that stands still: every reading gives the same moment. (A clock that stepped
    at each reading made two checkouts differ in their timestamps whenever one read the clock
    more or fewer times, e.g. one key lookup less, though every byte that depends on the
    time was built the same way.)"""

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _Clock:  # type: ignore[override]
        return _tick[0]  # type: ignore[return-value]


def _deterministic() -> None:
    """Seeded ids, nonces and data keys; a fixed signing key; the stepping clock."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    import ledger.domain.timestamps as timestamps

    os.urandom = _rng.randbytes
    fixed = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    ed25519.Ed25519PrivateKey.generate = staticmethod(lambda: fixed)  # type: ignore[method-assign]
    timestamps.datetime = _Clock  # type: ignore[misc]
    uuid.uuid4 = lambda: uuid.UUID(bytes=_rng.randbytes(16), version=4)


def _bodies(doc: dict[str, Any]) -> list[dict[str, Any]]:
    chunks, document_id = doc["chunks"], doc["document_id"]

    def cited(chunk: int = 0, **fields: Any) -> dict[str, Any]:
        entry = {
            "document_id": document_id,
            "chunk_id": chunks[chunk]["chunk_id"],
            "snippet": "Audit logs are kept",
        }
        return {**entry, **fields}

    breakdown = [{"component": "bm25", "value": "1.5"}, {"component": "external", "value": "-2"}]
    bodies = [
        {"query": "q plain", "engine": "external:bench", "selected_entries": [cited(score="2.5")]},
        {
            "query": "q rich words here é",
            "engine": "external:a.b-c",
            "subject_id": "subj-1",
            "task": {
                "task_id": "t-1",
                "deadline_ms": 1500,
                "auth_scope": ["retrieval.write", "zzz", "ingest.write"],
            },
            "selected_entries": [
                cited(
                    score="1e-05",
                    score_breakdown=breakdown,
                    explanation="because",
                    expires_at="2026-12-01T00:00:00Z",
                ),
                cited(0, snippet="kept"),
            ],
            "filters_applied": [{"rule_id": "r1", "chunk_id": "x", "action": "deny"}],
        },
        {"query": "q no hit", "engine": "external:bench", "status": "no_hit"},
        {
            "query": "q ctx",
            "engine": "external:bench",
            "context_hash": "a" * 64,
            "task": {"auth_scope": []},
            "selected_entries": [cited(explanation="")],
        },
        {
            "query": "q bad snippet",
            "engine": "external:bench",
            "selected_entries": [cited(snippet="not in it")],
        },
        {
            "query": "q late",
            "engine": "external:bench",
            "selected_entries": [cited(expires_at="2099-01-01T00:00:00Z")],
        },
        {
            "query": "q unknown",
            "engine": "external:bench",
            "selected_entries": [{"document_id": document_id, "chunk_id": "nope", "snippet": "x"}],
        },
        {  # several log entries
            "query": "q big " * 10,
            "engine": "external:bench",
            "selected_entries": [cited(explanation="x" * 3000, score=str(i)) for i in range(60)],
        },
    ]
    if len(chunks) > 1:
        two = [cited(1, snippet="Backups"), cited(0)]
        bodies.append({"query": "q two chunks", "engine": "external:bench", "selected_entries": two})
    return bodies


def record(backend: str) -> tuple[list[bytes], list[Any]]:
    """(every log entry, every answer) of the fixed requests."""
    from _support import DOC, drop_schema, scratch_config, services_with_document

    from ledger.domain.events import UnverifiedCitation
    from ledger.schemas.requests import RetrievalIn
    from ledger.usecases.retrievals import BatchItem, record_retrieval, record_retrievals
    from ledger.writing.idempotency import IdempotencyKey
    from tests.factories import TENANT

    config, schema = scratch_config(backend, Path(tempfile.mkdtemp()), "same_bytes_")
    text = DOC + "\n## More\n\nSome more text here that is long. " + "word " * 50 + "\n"
    services, caller, doc = services_with_document(config, TENANT, text)
    services.context.clock = lambda: _Clock.now(dt.UTC)
    bodies = _bodies(doc)

    def key(n: int) -> Any:
        return IdempotencyKey(TENANT, f"key-{n}", hashlib.sha256(f"fp-{n}".encode()).hexdigest())

    items = [BatchItem(key(n), RetrievalIn.model_validate(body)) for n, body in enumerate(bodies)]
    items.append(BatchItem(None, None, problem="retrieval.query: bad"))
    items.append(BatchItem(key(100), RetrievalIn.model_validate(bodies[0]), run_id="run-9", trace_id="tr-9"))
    unverifiable = (
        UnverifiedCitation(rank=1, reason="no_id_no_content"),
        UnverifiedCitation(rank=2, carried_id="c9", score="1.5", reason="unknown_id_no_content"),
    )
    items.append(
        BatchItem(
            key(101), RetrievalIn.model_validate(bodies[0]), unverifiable=unverifiable, data_source="store-1"
        )
    )
    answers: list[Any] = []
    try:
        for round_ in range(2):  # the second round replays every key (dedup answers)
            for o in record_retrievals(services.context, caller, items):
                body = o.result.body if o.result else None
                error = (type(o.error).__name__, str(o.error)) if o.error else None
                answers.append(
                    ("batch", round_, o.index, body, o.result.created if o.result else None, error)
                )
        for n, body in enumerate(bodies[:4]):
            keyed = dataclasses.replace(caller, idempotency=key(200 + n))
            result = record_retrieval(services.context, keyed, RetrievalIn.model_validate(body))
            answers.append(("single", n, result.body, result.created))
        return [event.entry for event in services.context.ledger.read(1)], answers
    finally:
        services.close()
        drop_schema(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="checkout whose code runs")
    parser.add_argument("--out", type=Path, required=True, help="where the entries and answers are written")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    _deterministic()
    entries, answers = record(args.backend)
    lines = [entry.decode() for entry in entries] + [json.dumps(a, sort_keys=True) for a in answers]
    args.out.write_text("\n".join(lines) + "\n")
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(f"{len(entries)} entries, {len(answers)} answers, sha256 {digest}")


if __name__ == "__main__":
    main()
