"""`citeledger tokens create | list | revoke`: bearer tokens, each change a signed entry.

Their work lives in the web package (`api.token_admin`), imported inside each command.
"""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.common import EXIT_FAILED, EXIT_USAGE, fail
from cli.options import DataDir
from ledger.usecases.scopes import SCOPES

if TYPE_CHECKING:
    from api.config import ApiConfig

tokens_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Manage API bearer tokens")

ActorOption = Annotated[
    str | None,
    typer.Option("--actor", help="Who does it, as recorded in the signed entry (default cli:<login name>)"),
]


def _config(data_dir: Path | None) -> ApiConfig:
    from cli.server import _prepare

    return _prepare(data_dir)


def _actor(actor: str | None) -> str:
    """The entry's actor: given, or `cli:<login>` (reduced to the identifier's characters)."""
    if actor is None:
        try:
            login = getpass.getuser()
        except (KeyError, OSError):  # no login name in a bare container
            login = "operator"
        actor = "cli:" + (re.sub(r"[^A-Za-z0-9._@-]", "-", login)[:100] or "operator")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$", actor):
        fail(
            "--actor: letters, digits and . _ : @ - (at most 128), starting with a letter or digit",
            EXIT_USAGE,
        )
    return actor


@tokens_app.command("create")
def tokens_create(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Tenant the token is bound to")] = None,
    scopes: Annotated[
        str | None, typer.Option("--scopes", help=f"Comma-separated, of: {', '.join(SCOPES)}")
    ] = None,
    operator: Annotated[
        bool,
        typer.Option(
            "--operator",
            help="An operator token: bound to no tenant, no scopes; it exports the whole log "
            "(GET /v1/operator/export) and manages tokens (/v1/operator/tokens)",
        ),
    ] = False,
    expires_in: Annotated[
        str | None, typer.Option("--expires-in", help="Expire after this long: 90m, 12h, 30d")
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option("--expires-at", help="Expire at this UTC time (RFC 3339)")
    ] = None,
    actor: ActorOption = None,
    data_dir: DataDir = None,
) -> None:
    """Create a token; prints the bearer value once (only its hash is stored) and records a
    signed TokenIssued entry."""
    from api.token_admin import issue_token, parse_expiry
    from ledger.usecases.errors import Invalid
    from ledger.writing.application import Ledger
    from ledger.writing.integrity import IntegrityHold

    if operator and (tenant is not None or scopes is not None):
        fail("--operator takes neither --tenant nor --scopes (bound to no tenant)", EXIT_USAGE)
    if not operator and (tenant is None or scopes is None):
        fail("--tenant and --scopes are required (or --operator)", EXIT_USAGE)
    who = _actor(actor)
    try:
        expiry = parse_expiry(expires_in, expires_at)
    except Invalid as exc:
        fail("--" + exc.message.replace("_", "-", 1), EXIT_USAGE)
    if tenant is not None and not re.match(r"^[a-z0-9][a-z0-9_-]{0,62}$", tenant):
        fail("--tenant must match [a-z0-9][a-z0-9_-]{0,62}", EXIT_USAGE)
    wanted = [s.strip() for s in (scopes or "").split(",") if s.strip()]
    config = _config(data_dir)
    with Ledger(config.ledger.__class__(**{**config.ledger.__dict__, "run_checkpointer": False})) as ledger:
        try:
            bearer, _view, _position = issue_token(
                ledger,
                config.token_path,
                actor=who,
                tenant=tenant,
                scopes=wanted,
                operator=operator,
                expires_at=expiry,
            )
        except Invalid as exc:
            fail("--" + exc.message, EXIT_USAGE)
        except IntegrityHold as exc:
            fail(f"no token created: {exc}", EXIT_FAILED)
    typer.echo(bearer)


@tokens_app.command("list")
def tokens_list(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object")] = False,
    data_dir: DataDir = None,
) -> None:
    """Every token of the tokens file: id, kind, tenant, scopes, created, expires, revoked,
    last used (to the minute), status. Never a secret nor its hash."""
    from api.token_admin import list_tokens

    tokens = list_tokens(_config(data_dir).token_path)
    if as_json:
        typer.echo(json.dumps({"tokens": tokens}, indent=2))
        return
    columns = ("token_id", "status", "kind", "tenant", "scopes", "created_at", "expires_at", "last_used_at")
    rows = [[_cell(token[c]) for c in columns] for token in tokens]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(columns)]
    for row in [list(columns), *rows]:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (`tokens list`)")],
    actor: ActorOption = None,
    data_dir: DataDir = None,
) -> None:
    """Revoke a token: every API worker refuses it (401) within about a second, its console
    sessions end; records a signed TokenRevoked entry."""
    from api.token_admin import revoke_token
    from ledger.usecases.errors import NotFound
    from ledger.writing.application import Ledger
    from ledger.writing.integrity import IntegrityHold

    who = _actor(actor)
    config = _config(data_dir)
    with Ledger(config.ledger.__class__(**{**config.ledger.__dict__, "run_checkpointer": False})) as ledger:
        try:
            _view, position = revoke_token(ledger, config.token_path, token_id, actor=who)
        except IntegrityHold as exc:
            fail(
                f"token {token_id} is revoked (refused within a second), but its TokenRevoked entry "
                f"is not recorded: {exc}; after `citeledger repair`, run this again to record it",
                EXIT_FAILED,
            )
        except NotFound:
            fail(
                f"no token {token_id[:128]!r} in {config.token_path} (see `citeledger tokens list`)",
                EXIT_USAGE,
            )
    if position is None:
        typer.echo(f"token {token_id} was already revoked (and recorded); nothing new recorded")
    else:
        typer.echo(f"revoked token {token_id}; TokenRevoked recorded at position {position}")


def register(app: typer.Typer) -> None:
    app.add_typer(tokens_app, name="tokens")
