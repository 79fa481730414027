"""What the ledger commands share: the `--data-dir`, `--public-key`, witness and receipt-tenant
options, the tenant a command acts for, and an existing ledger's configuration."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.common import ledger_config

if TYPE_CHECKING:
    from ledger.config import LedgerConfig

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory (default $CITELEDGER_DATA_DIR or ./citeledger-data)"),
]
WitnessKeys = Annotated[
    list[Path] | None,
    typer.Option(
        "--witness-key",
        help="A file holding a witness's vkey (`citeledger witness vkey`); repeatable",
    ),
]
MinWitnesses = Annotated[
    int | None,
    typer.Option(
        "--min-witnesses",
        min=0,
        help="How many of the --witness-key witnesses must have cosigned (default 1 with keys, else 0)",
    ),
]
ReceiptTenant = Annotated[
    str | None,
    typer.Option("--tenant", help="Tenant of the receipt (default $CITELEDGER_TENANT or 'default')"),
]
PublicKey = Annotated[
    Path | None,
    typer.Option("--public-key", help="Trusted root public key (default <data-dir>/keys/root.pub)"),
]


def existing_config(data_dir: Path | None, *, checkpointer: bool = False) -> LedgerConfig:
    """An existing ledger's configuration (a directory or schema without one is refused)."""
    return ledger_config(data_dir, run_checkpointer=checkpointer)


def tenant_or_default(tenant: str | None) -> str:
    """The tenant given, else $CITELEDGER_TENANT, else `default`."""
    return tenant or os.environ.get("CITELEDGER_TENANT", "default")
