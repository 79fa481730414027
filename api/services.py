"""What the routes share in one worker process: the ledger, its group
committer, tokens, limits, the write-side catalog, metrics."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from api.auth import TokenStore
from api.catalog import Catalog
from api.config import ApiConfig, server_version
from api.idempotency import IdempotencyStore
from api.metrics import Metrics
from api.ratelimit import Bucket, DatabaseBucket, RateLimiter, RedisBucket
from api.retention_sweep import RetentionScheduler
from ledger.application import Ledger
from ledger.entries import EventDraft, RecordedEvent
from ledger.group_commit import GroupCommitter
from projections.queries import ReadModels
from projections.runner import ProjectionRunner, embedded

log = logging.getLogger("citeledger.api")
T = TypeVar("T")
NO_POLICY = "none"


class ReceiptCache:
    """(tenant, receipt_id) -> its RetrievalRecorded entry. Entries are immutable (the
    log is append-only; scrubbing destroys keys, never bytes), so a hit never goes stale.
    Bounded: the oldest half is dropped when full."""

    def __init__(self, max_items: int = 20_000) -> None:
        self.max_items = max_items
        self._items: dict[tuple[str, str], RecordedEvent] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str, receipt_id: str) -> RecordedEvent | None:
        return self._items.get((tenant, receipt_id))

    def put(self, tenant: str, receipt_id: str, event: RecordedEvent) -> None:
        with self._lock:
            if len(self._items) >= self.max_items:
                for key in list(self._items)[: self.max_items // 2]:
                    del self._items[key]
            self._items[(tenant, receipt_id)] = event


class Services:
    def __init__(self, config: ApiConfig, metrics: Metrics) -> None:
        self.config = config
        self.server_version = server_version()
        self.started = time.monotonic()
        self.last_error: str | None = None
        self.metrics = metrics
        self.ledger = Ledger(config.ledger)
        try:
            self.committer = GroupCommitter(self.ledger, max_batch_events=config.group_commit_max_events)
            store = self.ledger.store
            self.catalog = Catalog(store)
            self.catalog.catch_up(self.ledger)
            self.ledger.on_commit(self._after_commit)
            # Embedded (the SQLite default): read models follow each commit in this process.
            # Scale-out: `citeledger project` (or `serve`'s projector thread) runs them; the
            # workers only ensure the tables exist and read them.
            if config.embedded_projections is None:
                run_here = not config.ledger.is_postgres
            else:
                run_here = config.embedded_projections
            self.projector: ProjectionRunner = embedded(self.ledger) if run_here else ProjectionRunner(store)
            self.read_models = ReadModels(store)
            self.tokens = TokenStore(config.token_path, config.tokens_env)
            self.idempotency = IdempotencyStore(store)
            bucket: Bucket | None = None
            if config.rate_limit_rps > 0:
                if config.redis_url:
                    bucket = RedisBucket(
                        config.redis_url, self._namespace(), config.rate_limit_rps, config.rate_limit_burst
                    )
                else:
                    bucket = DatabaseBucket(store, config.rate_limit_rps, config.rate_limit_burst)
            self.rate_limiter = RateLimiter(bucket)
        except Exception:
            self.ledger.close()
            raise
        self.retention: RetentionScheduler | None = (
            RetentionScheduler(self.ledger, self.catalog, config.retention_interval_s)
            if config.retention_interval_s > 0
            else None
        )
        # Wall clock for retention decisions; tests travel in time by replacing it.
        self.clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
        self.limiter = anyio.CapacityLimiter(64)
        self.receipt_cache = ReceiptCache()
        self._policy_cache: dict[str, tuple[float, str]] = {}
        self._policy_lock = threading.Lock()

    def _namespace(self) -> str:
        """Rate-limit buckets are per database, so two deployments sharing Redis do not mix."""
        ledger = self.config.ledger
        where = ledger.database_url or str(ledger.sqlite_path.resolve())
        return hashlib.sha256(where.encode()).hexdigest()[:16]

    def _after_commit(self, head: int) -> None:
        # Runs in the writer thread after each group commit: one index transaction per batch.
        self.catalog.catch_up(self.ledger)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking ledger work off the event loop; a request past its deadline stops waiting."""
        return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True, limiter=self.limiter)

    def append(self, drafts: list[EventDraft], tenant: str) -> list[RecordedEvent]:
        try:
            committed = self.committer.submit(drafts, tenant_id=tenant)
        except Exception as exc:
            self.last_error = f"append failed: {type(exc).__name__}"
            raise
        for event in committed:
            self.metrics.events_appended.labels(event.type).inc()
            if event.type == "RetrievalRecorded":
                self.metrics.retrievals.labels(str(event.payload.get("status"))).inc()
        return committed

    def policy_version(self, tenant: str | None) -> str:
        tenant = tenant or "default"
        now = time.monotonic()
        cached = self._policy_cache.get(tenant)
        if cached is not None and now - cached[0] < 1.0:
            return cached[1]
        try:
            row = self.catalog.policy(tenant)
        except Exception:  # noqa: BLE001 - a version label never fails a response
            return cached[1] if cached else NO_POLICY
        value = row.policy_version if row else NO_POLICY
        self._policy_cache[tenant] = (now, value)
        return value

    def forget_policy(self, tenant: str) -> None:
        self._policy_cache.pop(tenant, None)

    def projection_health(self) -> tuple[bool, int | None]:
        """(ok, lag) of the read models."""
        health = self.projector.health()
        lag = max((item["lag"] for item in health["projections"].values()), default=0)
        return bool(health["ok"]), int(lag)

    def close(self) -> None:
        if self.retention is not None:
            self.retention.close()
        self.committer.close()
        self.ledger.close()
