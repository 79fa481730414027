"""Use cases on exports: a tenant's own entries with proofs, or the whole log for an operator."""

from __future__ import annotations

from collections.abc import Iterator

from ledger.evidence.tenant_export import iter_tenant_export
from ledger.storage.audit import iter_export
from ledger.usecases.context import Caller, UseCaseContext

_CHUNK_BYTES = 256 * 1024


def _chunked(lines: Iterator[bytes]) -> Iterator[bytes]:
    """Lines joined into chunks of about 256 KiB: few writes, bounded memory."""
    buffer: list[bytes] = []
    size = 0
    for line in lines:
        buffer.append(line)
        size += len(line)
        if size >= _CHUNK_BYTES:
            yield b"".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield b"".join(buffer)


def tenant_export(ctx: UseCaseContext, caller: Caller) -> Iterator[bytes]:
    """The caller's tenant's entries, each with its inclusion proof against one signed
    checkpoint, plus the key chain: nothing of any other tenant (`ledger.evidence.tenant_export`)."""
    return _chunked(iter_tenant_export(ctx.ledger, caller.tenant_id))


def whole_log_export(ctx: UseCaseContext) -> Iterator[bytes]:
    """Every entry of every tenant and every checkpoint, for an operator (bound to no tenant)."""
    ledger = ctx.ledger
    return _chunked(iter_export(ledger.store, ledger.root_public_key))
