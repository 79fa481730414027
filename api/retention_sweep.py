"""The retention sweep: destroy the expiry keys of every tenant whose day is
over, sparing scopes under a legal hold. Run by `citeledger retention run`
and periodically inside `serve`; idempotent, so workers may overlap."""

from __future__ import annotations

import datetime as dt
import logging
import threading

from api.catalog import Catalog
from ledger.application import Ledger
from ledger.entries import RecordedEvent
from ledger.retention import record_pending, run_retention

log = logging.getLogger("citeledger.retention")


def sweep(ledger: Ledger, catalog: Catalog, now: dt.datetime | None = None) -> list[RecordedEvent]:
    moment = now or dt.datetime.now(dt.UTC)
    catalog.catch_up(ledger)
    recorded = record_pending(ledger, actor="retention")
    for tenant in catalog.tenants():
        event = run_retention(
            ledger, tenant_id=tenant, now=moment, held_scopes=catalog.held_scopes(tenant), actor="retention"
        )
        if event is not None:
            recorded.append(event)
    return recorded


class RetentionScheduler:
    """Sweeps every `interval_s` on a daemon thread until closed."""

    def __init__(self, ledger: Ledger, catalog: Catalog, interval_s: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, args=(ledger, catalog, interval_s), name="citeledger-retention", daemon=True
        )
        self._thread.start()

    def _loop(self, ledger: Ledger, catalog: Catalog, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                scrubbed = sweep(ledger, catalog)
                if scrubbed:
                    log.info("retention sweep recorded %d scrub entries", len(scrubbed))
            except Exception:  # a failed sweep is retried at the next interval
                log.exception("retention sweep failed")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
