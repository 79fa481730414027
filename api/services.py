"""One worker process's wiring: the ledger and its group committer, the
projection runner and the write-side lookups it feeds, the use-case context,
tokens, rate limits, metrics. Routes receive the parts they need through
Litestar dependency injection (`api.dependencies`), never by reaching in here.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar, TypeVarTuple

from api.auth import TokenStore
from api.config import ApiConfig, server_version
from api.contract import describe
from api.metrics import Metrics
from api.ratelimit import Bucket, DatabaseBucket, RateLimiter, RedisBucket
from api.request_threads import RequestThreads
from bootstrap import read_side, use_case_context
from ledger.retrieval.source_registry import SourceRegistry
from ledger.storage.claims import DocumentClaims
from ledger.storage.log_repeats import log_failure
from ledger.usecases.retention import sweep
from ledger.writing import idempotency
from ledger.writing.application import Ledger, Notification
from ledger.writing.group_commit import GroupCommitter
from projections.queries import ReadModels

log = logging.getLogger("citeledger.api")
T = TypeVar("T")
# The arguments are checked against the function: a call site that passes one too many fails mypy.
Ts = TypeVarTuple("Ts")
NO_POLICY = "none"
REQUEST_THREADS = 64
FOLLOW_INTERVAL_S = 1.0
IDEMPOTENCY_PURGE_INTERVAL_S = 3600.0  # embedded: how soon entries of other processes (the CLI) show up


class Services:
    def __init__(self, config: ApiConfig, metrics: Metrics) -> None:
        self.config = config
        self.server_version = server_version()
        self.started = time.monotonic()
        self.last_error: str | None = None
        self.metrics = metrics
        self.ledger = Ledger(config.ledger)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        try:
            store = self.ledger.store
            self.committer = GroupCommitter(self.ledger, max_batch_events=config.group_commit_max_events)
            # Embedded (the SQLite default): read models follow each commit in this process.
            # Scale-out: `citeledger project` runs them; workers catch the write-side models
            # up themselves before a decision that needs them.
            if config.embedded_projections is None:
                self.embedded = not store.adapter.scale_out
            else:
                self.embedded = config.embedded_projections
            side = read_side(self.ledger, catch_up=self.embedded)
            self.projector = side.runner
            self.lookups = side.lookups
            self.lookups.load_policies()
            self.ledger.on_commit(self._count)
            self.claims = DocumentClaims(store)
            self.sources = SourceRegistry(config.ledger.data_dir)
            self.read_models = ReadModels(store)
            self.context = use_case_context(
                self.ledger,
                side,
                self.committer.write,
                write_all=self.committer.write_all,
                retention_for=config.retention_for,
                clock=lambda: dt.datetime.now(dt.UTC),
            )
            self.tokens = TokenStore(config.token_path, config.tokens_env)
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
        # Every process follows the log: entries of other processes (other workers, the
        # CLI) reach this one's read models within FOLLOW_INTERVAL_S, or at once on a miss.
        self._wake = threading.Event()
        self._followed = threading.Condition()
        self._follow_rounds = 0
        follower = threading.Thread(target=self._follow_loop, name="citeledger-follow", daemon=True)
        follower.start()
        self._threads.append(follower)
        if config.retention_interval_s > 0:
            self._start("citeledger-retention", config.retention_interval_s, self._sweep)
        self._start("citeledger-idempotency", IDEMPOTENCY_PURGE_INTERVAL_S, self._purge_idempotency)
        # Up to 64 request threads (`blocking`; `api.request_threads` says why not anyio's).
        self.request_threads = RequestThreads(REQUEST_THREADS, "citeledger-request")
        # Long-lived startup objects (schemas, routes, caches) leave the collector's view:
        # full collections then stay short, which keeps them out of the latency tail.
        gc.collect()
        gc.freeze()

    # -- background work -------------------------------------------------------------
    def _start(self, name: str, interval_s: float, work: Callable[[], None]) -> None:
        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    work()
                except Exception as exc:  # noqa: BLE001 - retried at the next interval
                    log_failure(log, f"{name} failed", exc)

        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _follow_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(FOLLOW_INTERVAL_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.ledger.sync()
                self.projector.catch_up()
                self.lookups.load_policies()
            except Exception as exc:  # noqa: BLE001 - retried at the next round
                log_failure(log, "following the log failed", exc)
            with self._followed:
                self._follow_rounds += 1
                self._followed.notify_all()

    def follow_now(self, timeout_s: float = 2.0) -> None:
        """Wait until the follower has applied everything committed before this call."""
        with self._followed:
            target = self._follow_rounds + 2  # a round already running may have missed the newest
            self._wake.set()
            deadline = time.monotonic() + timeout_s
            while self._follow_rounds < target and (left := deadline - time.monotonic()) > 0:
                self._wake.set()
                self._followed.wait(left)

    def _sweep(self) -> None:
        scrubbed = sweep(self.context)
        if scrubbed:
            log.info("retention sweep recorded %d scrub entries", len(scrubbed))

    def _purge_idempotency(self) -> None:
        idempotency.purge(self.ledger.store)

    def _count(self, committed: Sequence[Notification]) -> None:
        # Tallied first: one labelled increment per kind, not per entry (a batch is 1,000).
        appended = Counter(event.type for _, event in committed)
        statuses = Counter(
            str(event.payload.get("status")) for _, event in committed if event.type == "RetrievalRecorded"
        )
        for event_type, count in appended.items():
            self.metrics.events_appended.labels(event_type).inc(count)
        for status, count in statuses.items():
            self.metrics.retrievals.labels(status).inc(count)

    # -- helpers for the routes ----------------------------------------------------------
    @property
    def clock(self) -> Callable[[], dt.datetime]:
        return self.context.clock

    @clock.setter
    def clock(self, value: Callable[[], dt.datetime]) -> None:
        self.context.clock = value

    def _namespace(self) -> str:
        """Rate-limit buckets are per database, so two deployments sharing Redis do not mix."""
        ledger = self.config.ledger
        where = ledger.database_url or str(ledger.sqlite_path.resolve())
        return hashlib.sha256(where.encode()).hexdigest()[:16]

    async def blocking(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """Run blocking ledger work off the event loop. A request past its deadline stops
        waiting; the work itself learns it from the deadline its `Caller` carries (its
        commit is refused, CPU-heavy steps stop), so nothing it does outlives the 408."""
        try:
            return await self.request_threads.run(fn, *args)
        except Exception as exc:
            if describe(exc)[0] >= 500:  # a refusal is the caller's; a failure is ours
                self.last_error = f"{type(exc).__name__}"
            raise

    def policy_version(self, tenant: str | None) -> str:
        """Memory only (called on the event loop for every response)."""
        return self.lookups.policy_version(tenant or "default") or NO_POLICY

    def projection_health(self) -> tuple[bool, int | None]:
        """(ok, lag) of the read models."""
        health = self.projector.health()
        lag = max((item["lag"] for item in health["projections"].values()), default=0)
        return bool(health["ok"]), int(lag)

    def close(self) -> None:
        self.request_threads.close()
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self.committer.close()
        self.ledger.close()
