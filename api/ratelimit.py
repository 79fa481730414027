"""Token-bucket rate limits per token, shared by every worker process.

The bucket lives in Redis (`CITELEDGER_REDIS_URL`, one Lua script, atomic)
or, without Redis, in a side table of the ledger's own database (one upsert,
atomic). Either way all workers draw from the same bucket. A refused request
is 429 with `Retry-After` and `retryable: true`.

Leases: a busy worker does not pay one shared-store write per request. It
draws a small lease of tokens from the shared bucket in one atomic step and
spends it locally for at most `LEASE_TTL_S`; unspent tokens are credited back
to the bucket with the next draw. The lease grows (doubling) only while the
worker keeps exhausting it, and is capped at `rate * LEASE_TTL_S` (and a
quarter of the burst), so a slow limit (e.g. 0.5/s) still draws exactly one
token per request and every worker still draws from the same bucket; a busy
token with a high limit costs one shared write per lease, not per request.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread

from api.api_error import ApiError
from ledger.storage import adapters
from ledger.storage.store import Store

RATE_TABLE = adapters.RATE_TABLE
LEASE_TTL_S = 1.0
MAX_LEASE = 1024
# In a request's scope state: its rate limit was checked before the route's guard ran (by
# `api.receipt_shortcut`, which then handed the request on); the value is the refusal (an
# `ApiError`, 429) or None (a token spent). The guard checks no second time.
RATE_CHECKED = "citeledger.rate_checked"

_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(v[1]) or burst
local ts = tonumber(v[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local want = tonumber(ARGV[3]) or 1
local returned = tonumber(ARGV[4]) or 0
tokens = math.min(burst, tokens + returned)
local allowed = 0
local wait = 0
if tokens >= want then
  tokens = tokens - want
  allowed = want
elseif tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(wait)}
"""


class Bucket(Protocol):
    rate: float
    burst: int

    def take(self, key: str, want: int = 1, returned: int = 0) -> tuple[int, float]:
        """Credit `returned` unspent tokens, then draw `want` tokens (or 1 when fewer are
        left): (tokens granted, seconds until one is available when none was)."""
        ...


def refused(wait_s: float) -> ApiError:
    retry_after = max(1, math.ceil(wait_s))
    return ApiError(
        429,
        "rate_limited",
        f"rate limit exceeded; retry after {retry_after} s",
        retryable=True,
        headers={"Retry-After": str(retry_after)},
    )


class DatabaseBucket:
    """The bucket in the ledger's database: one atomic upsert per draw (the store
    adapter's `rate_bucket_take`), so every worker process shares it."""

    def __init__(self, store: Store, rate: float, burst: int) -> None:
        self.store, self.rate, self.burst = store, rate, burst
        store.create_tables(*store.adapter.rate_bucket_ddl())

    def take(self, key: str, want: int = 1, returned: int = 0) -> tuple[int, float]:
        want = max(1, min(int(want), self.burst))
        tokens, granted = self.store.adapter.rate_bucket_take(
            key, want=want, returned=returned, rate=self.rate, burst=self.burst, now=time.time()
        )
        return granted, 0.0 if granted else (1 - tokens) / self.rate


class RedisBucket:
    def __init__(self, url: str, namespace: str, rate: float, burst: int) -> None:
        import redis

        self.client: Any = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self.script: Any = self.client.register_script(_LUA)
        self.namespace, self.rate, self.burst = namespace, rate, burst

    def take(self, key: str, want: int = 1, returned: int = 0) -> tuple[int, float]:
        allowed, wait = self.script(
            keys=[f"citeledger:rl:{self.namespace}:{key}"],
            args=[self.rate, self.burst, max(1, int(want)), max(0, int(returned))],
        )
        return int(allowed), float(wait)


@dataclass
class Lease:
    remaining: int
    size: int
    expires: float


class _Draw:
    """One draw from the shared bucket in flight; requests of the same token wait for it."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.refused_for: float | None = None


class RateLimiter:
    def __init__(self, bucket: Bucket | None) -> None:
        self.bucket = bucket
        self.refusals = 0
        self._leases: dict[str, Lease] = {}
        self._draws: dict[str, _Draw] = {}
        if bucket is not None:
            self.max_lease = max(1, min(MAX_LEASE, int(bucket.rate * LEASE_TTL_S), bucket.burst // 4))
        else:
            self.max_lease = 1

    def spend(self, key: str) -> bool:
        """Spend one token of the key's lease if it has one left (no limit: always); False
        when the next lease must be drawn (`check` draws it)."""
        if self.bucket is None:
            return True
        lease = self._leases.get(key)
        if lease is not None and lease.remaining > 0 and time.monotonic() < lease.expires:
            lease.remaining -= 1  # event-loop only: no await between test and decrement
            return True
        return False

    async def check(self, key: str) -> None:
        """Spend one token of the key's lease; when it is spent, ONE request draws the next
        lease from the shared bucket while the others of that token wait for it."""
        while True:
            if self.spend(key):
                return
            lease = self._leases.get(key)
            draw = self._draws.get(key)
            if draw is None:
                break
            await draw.done.wait()
            if draw.refused_for is not None:
                self.refusals += 1
                raise refused(draw.refused_for)
        draw = self._draws[key] = _Draw()
        try:
            draw.refused_for = await self._draw(key, lease)
        finally:
            del self._draws[key]
            draw.done.set()
        if draw.refused_for is not None:
            self.refusals += 1
            raise refused(draw.refused_for)

    async def _draw(self, key: str, lease: Lease | None) -> float | None:
        """Draw the next lease; None when granted, else seconds until a token is available."""
        assert self.bucket is not None
        returned, size = 0, 1
        if lease is not None:
            if lease.remaining > 0:  # expired with tokens left: credit them back, draw less
                returned, size = lease.remaining, max(1, lease.size // 2)
            else:  # spent within its lifetime: this token is busy, draw more
                size = min(self.max_lease, lease.size * 2)
            lease.remaining = 0
        if len(self._leases) > 10_000:
            self._leases.clear()
        granted, wait = await anyio.to_thread.run_sync(self.bucket.take, key, size, returned)
        if granted < 1:
            return wait
        self._leases[key] = Lease(remaining=granted - 1, size=size, expires=time.monotonic() + LEASE_TTL_S)
        return None
