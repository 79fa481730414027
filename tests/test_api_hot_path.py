"""The API's hot-path shortcuts keep the contract: rate-limit leases still share
one bucket, cached chunk rows and receipts never leak across tenants, and the
cross-worker document claim keeps version numbers unique."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from api.api_error import ApiError
from api.ratelimit import DatabaseBucket, RateLimiter
from ledger.storage.claims import DocumentClaims
from ledger.writing.application import Ledger
from tests.api_support import DOC, Api, api, make_api  # noqa: F401


def test_bucket_draws_leases_and_credits_returns(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger(run_checkpointer=False)
    bucket = DatabaseBucket(ledger.store, rate=0.001, burst=10)
    assert bucket.take("k", 4) == (4, 0.0)  # 6 left
    assert bucket.take("k", 4)[0] == 4  # 2 left
    assert bucket.take("k", 4)[0] == 1  # fewer than wanted: one token, never more than exist
    assert bucket.take("k", 4)[0] == 1
    granted, wait = bucket.take("k", 1)
    assert granted == 0 and wait > 0
    assert bucket.take("k", 3, returned=3)[0] == 3  # unspent tokens come back to the shared bucket
    assert bucket.take("other", 10)[0] == 10  # buckets are per key


class CountingBucket:
    def __init__(self, inner: DatabaseBucket) -> None:
        self.inner, self.rate, self.burst, self.calls = inner, inner.rate, inner.burst, 0

    def take(self, key: str, want: int = 1, returned: int = 0) -> tuple[int, float]:
        self.calls += 1
        return self.inner.take(key, want, returned)


def test_busy_token_costs_few_shared_writes(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger(run_checkpointer=False)
    counting = CountingBucket(DatabaseBucket(ledger.store, rate=1000.0, burst=10_000))
    limiter = RateLimiter(counting)

    async def many() -> None:
        for _ in range(600):
            await limiter.check("tok")

    anyio.run(many)
    assert counting.calls < 60  # leases, not one shared write per request


def test_leases_from_two_workers_share_one_bucket(
    open_ledger: Callable[..., Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time as real_time

    import api.ratelimit as ratelimit_module

    class FrozenWallClock:  # no refill during the test: the bucket holds exactly `burst`
        monotonic = staticmethod(real_time.monotonic)

        @staticmethod
        def time() -> float:
            return 1_000_000.0

    monkeypatch.setattr(ratelimit_module, "time", FrozenWallClock)
    ledger = open_ledger(run_checkpointer=False)
    bucket = DatabaseBucket(ledger.store, rate=1000.0, burst=300)
    worker_a, worker_b = RateLimiter(bucket), RateLimiter(bucket)

    async def burst() -> tuple[int, int]:
        allowed = refused = 0
        for i in range(600):
            try:
                await (worker_a if i % 2 else worker_b).check("tok")
                allowed += 1
            except ApiError as exc:
                assert exc.status_code == 429
                refused += 1
        return allowed, refused

    allowed, refused = anyio.run(burst)
    assert allowed <= 300 and allowed + refused == 600
    assert allowed >= 300 - 2 * RateLimiter(bucket).max_lease  # at most the workers' unspent leases idle


def test_slow_limit_draws_one_token_at_a_time(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger(run_checkpointer=False)
    assert RateLimiter(DatabaseBucket(ledger.store, rate=0.5, burst=4)).max_lease == 1


def test_cached_receipt_stays_tenant_scoped(api: Api) -> None:
    doc = api.document()
    receipt = api.retrieval(doc)["receipt_id"]
    first = api.client.get(f"/v1/receipts/{receipt}", headers=api.headers())
    again = api.client.get(f"/v1/receipts/{receipt}", headers=api.headers())
    assert first.status_code == again.status_code == 200
    assert first.json()["event"] == again.json()["event"]
    assert api.services.lookups.receipt_position("acme", receipt) is not None
    other = api.client.get(f"/v1/receipts/{receipt}", headers=api.headers("other"))
    assert other.status_code == 404


def test_cached_chunks_stay_tenant_scoped(api: Api) -> None:
    doc = api.document()
    api.retrieval(doc)  # caches acme's chunk row
    body = api.retrieval_body(doc)
    response = api.client.post("/v1/retrievals", json=body, headers=api.headers("other"))
    assert response.status_code == 422 and response.json()["error"]["code"] == "unknown_chunk"


def test_document_claimed_by_another_worker_is_409_then_free(make_api: Callable[..., Api]) -> None:
    worker_a, worker_b = make_api(), make_api()
    first = worker_a.document()
    other_claims: DocumentClaims = worker_b.services.claims
    changed = DOC + "\nA changed line.\n"
    with other_claims.hold("acme", first["document_id"]):
        busy = worker_a.client.post(
            "/v1/documents",
            json={"path": "handbook/retention.md", "text": changed},
            headers=worker_a.headers(),
        )
        assert busy.status_code == 409, busy.text
        assert busy.json()["error"]["code"] == "document_busy"
        assert busy.json()["error"]["retryable"] is True
    after = worker_a.document(changed)
    assert after["version"] == 2 and after["document_id"] == first["document_id"]


def test_two_workers_ingesting_changes_get_distinct_versions(make_api: Callable[..., Api]) -> None:
    worker_a, worker_b = make_api(), make_api()
    worker_a.document()
    results: list[Any] = []

    def post(worker: Api, n: int) -> None:
        for i in range(3):
            text = DOC + f"\nworker {n} edit {i}\n"
            while True:
                response = worker.client.post(
                    "/v1/documents",
                    json={"path": "handbook/retention.md", "text": text},
                    headers=worker.headers(),
                )
                if response.status_code != 409:
                    break
            results.append(response)

    threads = [threading.Thread(target=post, args=(w, n)) for n, w in enumerate((worker_a, worker_b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(r.status_code == 201 for r in results), [r.text for r in results]
    versions = sorted(r.json()["version"] for r in results)
    assert versions == [2, 3, 4, 5, 6, 7]


def test_stale_claim_is_taken_over(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    import ledger.storage.claims as claims_module

    doc = api.document()
    claims: DocumentClaims = api.services.claims
    monkeypatch.setattr(claims_module, "CLAIM_STALE_S", 0.0)
    holder = claims._take("acme", doc["document_id"], "dead-worker", 0.1)
    assert holder is None  # a worker that took the claim and died without releasing
    after = api.document(DOC + "\nnew\n")
    assert after["version"] == 2


def test_idempotency_records_expire(api: Api) -> None:
    from ledger.writing import idempotency

    doc = api.document()
    body = api.retrieval_body(doc)
    headers = {**api.headers(), "Idempotency-Key": "expire-me"}
    first = api.client.post("/v1/retrievals", json=body, headers=headers)
    assert first.status_code == 201
    store = api.services.ledger.store
    assert idempotency.purge(store, older_than_s=3600) == 0  # still fresh: kept
    assert idempotency.lookup(store, "acme", "expire-me") is not None
    assert idempotency.purge(store, older_than_s=0) == 1
    again = api.client.post("/v1/retrievals", json=body, headers=headers)
    assert again.status_code == 201 and again.json()["dedup"] is False


def test_same_key_sent_concurrently_is_recorded_once(api: Api) -> None:
    doc = api.document()
    body = api.retrieval_body(doc)
    headers = {**api.headers(), "Idempotency-Key": "together"}
    answers: list[Any] = []

    def post() -> None:
        answers.append(api.client.post("/v1/retrievals", json=body, headers=headers))

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [a.status_code for a in answers] == [201] * 8, [a.text for a in answers]
    assert len({a.json()["receipt_id"] for a in answers}) == 1
    assert sum(1 for a in answers if a.json()["dedup"] is False) == 1
    api.services.ledger.sync()
    recorded = [e for e in api.services.ledger.read() if e.type == "RetrievalRecorded"]
    assert len(recorded) == 1


def _database_state(api: Api) -> dict[str, list[Any]]:
    """Every row of every table of the ledger's database (read through its own store)."""
    store = api.services.ledger.store
    with store.transaction(commit=False) as cursor:
        if store.dialect == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type='table'")
            names = [row["name"] for row in cursor.fetchall()]
        else:
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (store.schema,))
            names = [row["tablename"] for row in cursor.fetchall()]
        state = {}
        for name in sorted(names):
            cursor.execute(f"SELECT * FROM {store.table(name)}")
            state[name] = sorted(repr(tuple(dict(row).items())) for row in cursor.fetchall())
    return state


def test_reads_and_health_checks_write_nothing(api: Api) -> None:
    doc = api.document()
    receipt = api.retrieval(doc)
    api.services.follow_now()  # let the background follower settle first
    before = _database_state(api)
    h = api.headers()
    for path in (
        f"/v1/receipts/{receipt['receipt_id']}",
        "/v1/receipts?limit=5",
        "/v1/events?limit=5",
        f"/v1/events/{receipt['position']}",
        f"/v1/citations/{receipt['citation_ids'][0]}",
        "/v1/keys",
        "/v1/healthz",
        "/v1/version",
        "/v1/metrics",
    ):
        response = api.client.get(path, headers=h)
        assert response.status_code == 200, (path, response.text)
    # An unknown receipt (a miss waits for the follower; the request itself writes nothing).
    assert api.client.get("/v1/receipts/unknown-receipt", headers=h).status_code == 404
    after = _database_state(api)
    # The one shared write a read may cause: drawing a rate-limit lease (at most one per
    # token per lease lifetime), which is the limiter's job, not the read's.
    before.pop("citeledger_api_rate_limits", None)
    after.pop("citeledger_api_rate_limits", None)
    assert after == before
