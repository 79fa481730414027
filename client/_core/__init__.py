"""The client's sans-I/O core: the request each call makes (`calls`), reading an answer
size-capped into data or a typed error (`http`), the retry and breaker decisions (`retry`),
the spool bookkeeping and the paging. Pure code, driven by `client/_async/` (and the sync
client generated from it); it imports no httpx, no asyncio and nothing of `_async`, `_sync`
or `_io` (contract `client-core` in pyproject.toml)."""
