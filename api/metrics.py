"""Prometheus metrics (prometheus-client). With `PROMETHEUS_MULTIPROC_DIR`
set, every worker writes its samples there and `/v1/metrics` aggregates
them; otherwise each process reports its own."""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.request_seconds = Histogram(
            "citeledger_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route", "status"],
            buckets=_BUCKETS,
            registry=r,
        )
        self._request_children: dict[tuple[str, str, int], Any] = {}
        self.events_appended = Counter(
            "citeledger_events_appended_total", "Signed events appended through the API", ["type"], registry=r
        )
        self.retrievals = Counter(
            "citeledger_retrievals_total", "Retrieval receipts recorded, by status", ["status"], registry=r
        )
        self.rate_limited = Counter(
            "citeledger_rate_limited_total", "Requests refused by rate limits", registry=r
        )
        self.timeouts = Counter(
            "citeledger_request_timeouts_total", "Requests past their deadline", registry=r
        )
        self.denied = Counter("citeledger_auth_denied_total", "401 and 403 answers", ["status"], registry=r)
        self.projection_lag = Gauge(
            "citeledger_projection_lag_events",
            "Entries not yet in the read models",
            registry=r,
            multiprocess_mode="max",
        )

    def observe(self, scope: Any, status: int, duration: float) -> None:
        key = (scope.get("method", "?"), scope.get("path_template") or "unmatched", status)
        child = self._request_children.get(key)
        if child is None:  # `labels` checks and locks: once per (method, route, status)
            child = self._request_children[key] = self.request_seconds.labels(*key[:2], str(status))
        child.observe(duration)
        if status == 429:
            self.rate_limited.inc()
        elif status == 408:
            self.timeouts.inc()
        elif status in (401, 403):
            self.denied.labels(str(status)).inc()

    def render(self) -> bytes:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return bytes(generate_latest(registry))
        return bytes(generate_latest(self.registry))
