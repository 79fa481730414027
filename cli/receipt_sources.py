"""Where `citeledger receipts` reads: the local data directory (the same use cases and read
models as the server) or a server through the Python client; both answer as the HTTP API does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import typer
from rich.console import Console

from cli.options import tenant_or_default

err = Console(stderr=True)


class Refused(Exception):
    """The ledger refused or failed; `message` says why."""


class ReceiptSource(Protocol):
    def page(self, filters: dict[str, Any], cursor: str | None, limit: int) -> dict[str, Any]: ...
    def detail(self, receipt_id: str, content: bool) -> dict[str, Any]: ...
    def bundle(self, receipt_id: str, *, latest: bool = False) -> dict[str, Any]: ...
    def root_key(self) -> tuple[bytes, str]: ...


class LocalSource:
    """The local data directory, through the same use cases and read models as the server."""

    def __init__(self, data_dir: Path | None, tenant: str) -> None:
        from bootstrap import ledger_context
        from ledger.config import LedgerConfig
        from ledger.usecases.context import Caller
        from ledger.usecases.scopes import SCOPES
        from ledger.writing.application import Ledger
        from projections.queries import ReadModels

        self.config = LedgerConfig.from_env(data_dir)
        self.ledger = Ledger(self.config)
        self.ctx = ledger_context(self.ledger)
        self.read_models = ReadModels(self.ledger.store)
        self.caller = Caller(tenant_id=tenant, actor="cli", scopes=frozenset(SCOPES))

    def page(self, filters: dict[str, Any], cursor: str | None, limit: int) -> dict[str, Any]:
        from ledger.retrieval.question_words import BadQuestionSearch
        from ledger.usecases.ports import ReceiptFilter
        from ledger.usecases.receipt_reads import receipts_page
        from projections.views import InvalidCursor

        order = filters.pop("order", "desc")
        content = filters.pop("content", None) == "plain"
        flt = ReceiptFilter(
            recorded_from=filters.pop("since", None), recorded_to=filters.pop("until", None), **filters
        )
        try:
            return receipts_page(
                self.ctx,
                self.read_models,
                self.caller,
                flt,
                cursor=cursor,
                limit=limit,
                order=order,
                content=content,
            )
        except InvalidCursor:
            raise Refused("invalid_cursor: the cursor is not one this command printed") from None
        except BadQuestionSearch as exc:
            raise Refused(f"bad_request: {exc}") from None

    def detail(self, receipt_id: str, content: bool) -> dict[str, Any]:
        from ledger.usecases.receipt_reads import receipt_detail
        from ledger.usecases.receipts import receipt_with_chain

        event, chain = receipt_with_chain(self.ctx, self.caller.tenant_id, receipt_id)
        return receipt_detail(self.ctx, self.caller, event, chain, content=content)

    def bundle(self, receipt_id: str, *, latest: bool = False) -> dict[str, Any]:
        from ledger.usecases.receipts import receipt_bundle

        return receipt_bundle(self.ctx, self.caller.tenant_id, receipt_id, latest=latest)

    def root_key(self) -> tuple[bytes, str]:
        from ledger.tlog.signing import KeyDirectory, read_public_key_file

        path = KeyDirectory(self.config.keys_dir).root_public_key_path
        return read_public_key_file(path), str(path)

    def close(self) -> None:
        self.ledger.close()


class RemoteSource:
    """A server, through the Python client (its retries, timeouts and error envelope)."""

    def __init__(self, url: str, token: str, public_key: Path | None) -> None:
        from client import Client

        self.client = Client(url, token, drain_interval_s=None, max_attempts=2)
        self.public_key = public_key

    def page(self, filters: dict[str, Any], cursor: str | None, limit: int) -> dict[str, Any]:
        return self.client.receipts(**filters, cursor=cursor, limit=limit)

    def detail(self, receipt_id: str, content: bool) -> dict[str, Any]:
        return self.client.receipt(receipt_id, content=content)

    def bundle(self, receipt_id: str, *, latest: bool = False) -> dict[str, Any]:
        return self.client.receipt_bundle(receipt_id, latest=latest)

    def root_key(self) -> tuple[bytes, str]:
        from ledger.tlog.signing import read_public_key_file, unb64

        if self.public_key is not None:
            return read_public_key_file(self.public_key), str(self.public_key)
        served = self.client.keys()["root_public_key"]
        return unb64(served), "as served by the server (pass --public-key for an independent check)"

    def close(self) -> None:
        self.client.close()


@contextmanager
def open_source(
    url: str | None, token: str | None, data_dir: Path | None, tenant: str, public_key: Path | None = None
) -> Iterator[ReceiptSource]:
    from client.errors import LedgerError
    from ledger.usecases.errors import UseCaseError

    source: LocalSource | RemoteSource
    if url:
        if not token:
            err.print("[red]--token (or $CITELEDGER_TOKEN) is needed with --url")
            raise typer.Exit(2)
        source = RemoteSource(url, token, public_key)
    else:
        source = LocalSource(data_dir, tenant_or_default(tenant))
    try:
        yield source
    except (LedgerError, UseCaseError, Refused) as exc:
        code = getattr(exc, "code", "refused")
        message = getattr(exc, "message", str(exc))
        err.print(f"[red]refused ({code}): {message}")
        raise typer.Exit(2) from None
    finally:
        source.close()
