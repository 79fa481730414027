"""`citeledger serve` and `citeledger retention run` (`tokens` commands: `cli.tokens`).

Their work lives in the web package: each command imports `api` inside its
body, so registering them costs the offline commands nothing.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.common import EXIT_USAGE, fail, ledger_config
from cli.options import DataDir

if TYPE_CHECKING:
    from api.config import ApiConfig


# What `serve` always passes uvicorn: each worker builds the app from the environment (the
# settings checked above), no access log, up to 10 s for requests in flight when stopped, and
# a response's head and body written together (`api.http_protocol`).
APP_FACTORY = "api.app:app_from_env"
UVICORN_FIXED: dict[str, Any] = {
    "factory": True,
    "access_log": False,
    "timeout_graceful_shutdown": 10,
    "http": "api.http_protocol:CoalescingHttpToolsProtocol",
}


def _prepare(data_dir: Path | None, *, create: bool = False) -> ApiConfig:
    """The server's settings (a bad one is exit 2, naming it and its rule) for the ledger at
    `data_dir`, which must exist unless `create` (only `serve` creates one)."""
    from api.config import ApiConfig

    if data_dir is not None:
        os.environ["CITELEDGER_DATA_DIR"] = str(data_dir)
    config = ApiConfig.from_env(data_dir)
    ledger_config(data_dir, create=create)  # refuses a place that holds no ledger
    if create:
        config.ledger.data_dir.mkdir(parents=True, exist_ok=True)
    return config


def serve(
    data_dir: DataDir = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8000,
    workers: Annotated[int, typer.Option("--workers", min=1, max=64)] = 1,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """Start the HTTP API (embedded SQLite by default; several workers on PostgreSQL)."""
    import uvicorn

    from api.auth import ensure_bootstrap_token
    from ledger.storage import log_repeats
    from ledger.storage.adapters import adapter_class
    from ledger.storage.adapters.migrations import migrate_store
    from ledger.writing.application import Ledger

    config = _prepare(data_dir, create=True)
    if workers > 1 and not adapter_class(config.ledger).scale_out:
        typer.echo(
            "the embedded SQLite store runs one worker; set CITELEDGER_DATABASE_URL for more", err=True
        )
        workers = 1
    # The schema first: SQLite is migrated here and says so; a PostgreSQL schema shared by
    # several workers is migrated only by `citeledger migrate` (an older one is refused).
    outcome = migrate_store(config.ledger, upgrade=not adapter_class(config.ledger).scale_out)
    # Create keys, schema and the genesis entry once, before any worker starts.
    Ledger(config.ledger.__class__(**{**config.ledger.__dict__, "run_checkpointer": False})).close()
    typer.echo(f"store: {outcome.describe()}", err=True)  # once it opened: a failure stays one line
    bearer = ensure_bootstrap_token(config.token_path, config.bootstrap_token)
    if bearer is not None and config.bootstrap_token is None:
        typer.echo(f"created an all-scopes token for tenant 'default' (shown once): {bearer}", err=True)
    elif bearer is not None:  # the operator chose it: never echo a secret back
        typer.echo(
            "created an all-scopes token for tenant 'default' from CITELEDGER_BOOTSTRAP_TOKEN", err=True
        )
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stdout, format="%(message)s"
    )
    uvicorn.run(APP_FACTORY, host=host, port=port, workers=workers, log_level=log_level, **UVICORN_FIXED)
    log_repeats.flush_all()  # the counts of the last interval, before the process ends


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    retention_app = typer.Typer(help="Retention windows and crypto-shredding.", no_args_is_help=True)
    retention_app.command("run")(retention_run)
    app.add_typer(retention_app, name="retention")


def retention_run(
    data_dir: DataDir = None,
    now: Annotated[
        str | None, typer.Option("--now", help="Sweep as of this UTC time (RFC 3339); default: now")
    ] = None,
) -> None:
    """Destroy expired text (expiry keys whose day is over), sparing legal holds; record each scrub."""
    from bootstrap import ledger_context
    from ledger.domain.timestamps import parse_timestamp
    from ledger.usecases.retention import sweep
    from ledger.writing.application import Ledger

    config = _prepare(data_dir)
    moment = None
    if now:
        try:
            moment = parse_timestamp(now)
        except ValueError:
            fail(f"--now {now[:40]!r}: not an RFC 3339 time (e.g. 2026-01-31T00:00:00Z)", EXIT_USAGE)
    with Ledger(config.ledger) as ledger:
        recorded = sweep(ledger_context(ledger, retention_for=config.retention_for), moment)
    for event in recorded:
        typer.echo(
            f"position {event.position}: {event.tenant_id} {event.payload['reason']} "
            f"{len(event.payload['key_refs'])} key(s)"
        )
    typer.echo(f"{len(recorded)} scrub entr{'y' if len(recorded) == 1 else 'ies'} recorded")
