"""`citeledger documents show|erase|hold --path P [--source S]`: a document by the path people
know it by, on the local ledger: its versions, the receipts that cite it, its erasure and
holds; erase it or place a legal hold on it (the HTTP routes act by id; these resolve the path
first, with the same use cases). `show` also reads a server (`--url`/`--token`,
`$CITELEDGER_URL`/`$CITELEDGER_TOKEN`): `GET /v1/documents?path=&source=`, which answers as the
local use case does, so both modes print the same."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from cli.common import ledger_config
from cli.options import DataDir, tenant_or_default
from cli.receipts import Token, Url

documents_app = typer.Typer(no_args_is_help=True, help="Documents by path: show, erase, hold (local ledger).")

PathOption = Annotated[str, typer.Option("--path", help="The document's path inside its source")]
SourceOption = Annotated[str, typer.Option("--source", help="The source it came from (default: any)")]
TenantOption = Annotated[
    str, typer.Option("--tenant", help="Tenant (default $CITELEDGER_TENANT or 'default')")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the answer as one JSON object")]


def _run(data_dir: Any, tenant: str, path: str, source: str, act: Callable[..., Any]) -> Any:
    """`act(context, caller, document)` on the one document at the path; exit 2 on a refusal."""
    from bootstrap import ledger_context
    from ledger.schemas.requests import DocumentPathIn
    from ledger.usecases.context import Caller
    from ledger.usecases.errors import UseCaseError
    from ledger.usecases.scopes import SCOPES
    from ledger.writing.application import Ledger

    try:
        target = DocumentPathIn(path=path, source=source or None)
    except ValidationError as exc:
        first = exc.errors()[0]
        typer.echo(f"refused (invalid): {'.'.join(map(str, first['loc']))}: {first['msg']}", err=True)
        raise typer.Exit(2) from None
    caller = Caller(
        tenant_id=tenant_or_default(tenant),
        actor="cli",
        scopes=frozenset(SCOPES),
    )
    with Ledger(ledger_config(data_dir)) as ledger:
        ctx = ledger_context(ledger)
        try:
            return act(ctx, caller, target)
        except UseCaseError as exc:
            typer.echo(f"refused ({exc.code}): {exc.message}", err=True)
            raise typer.Exit(2) from None


def _refused(code: str, message: str) -> typer.Exit:
    typer.echo(f"refused ({code}): {message}", err=True)
    return typer.Exit(2)


def _from_server(url: str, token: str | None, path: str, source: str) -> Any:
    """`GET /v1/documents?path=&source=` on the server at `url`; its refusal said as the local
    one is (exit 2), never its body beyond the error's code and message."""
    import httpx

    if not token:
        raise _refused("unauthorized", "--token (or $CITELEDGER_TOKEN) is needed with --url")
    params = {"path": path, **({"source": source} if source else {})}
    try:
        answer = httpx.get(
            url.rstrip("/") + "/v1/documents",
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        body = answer.json()
    except httpx.HTTPError:
        raise _refused("unavailable", "the ledger at --url did not answer") from None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise _refused("bad_gateway", "the ledger at --url answered outside its contract")
    if answer.status_code >= 400:
        found = body.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        raise _refused(str(error.get("code") or answer.status_code)[:80], str(error.get("message"))[:400])
    return body


def _describe(doc: dict[str, Any]) -> str:
    versions = "; ".join(
        f"v{v['version']} from position {v['live_from_position']}"
        + (f" to {v['live_to_position']}" if v["live_to_position"] else "")
        + f", {v['sensitivity']}, {v['parts']} part(s)"
        for v in doc["versions"]
    )
    erased = doc["erased"]
    lines = [
        f"{doc['path']} (source {doc['source']}): document {doc['document_id']}",
        f"  versions: {len(doc['versions'])}: {versions}",
        f"  cited by: {doc['receipts_citing']} receipt(s)",
        "  erased: "
        + (f"{erased['basis']} at position {erased['position']} ({erased['erased_at']})" if erased else "no"),
        f"  legal holds: {', '.join(doc['held_by']) or 'none'}",
    ]
    return "\n".join(lines)


@documents_app.command("show")
def show_command(
    path: PathOption,
    source: SourceOption = "",
    tenant: TenantOption = "",
    as_json: JsonOption = False,
    url: Url = None,
    token: Token = None,
    data_dir: DataDir = None,
) -> None:
    """Every document at the path: versions, citing receipts, erasure, holds (exit 2: none)."""
    from ledger.usecases.document_lookup import documents_by_path

    if url:
        body = _from_server(url, token, path, source)
    else:
        body = _run(data_dir, tenant, path, source, documents_by_path)
    if as_json:
        typer.echo(json.dumps(body, indent=2, sort_keys=True))
        return
    typer.echo("\n".join(_describe(doc) for doc in body["documents"]))


@documents_app.command("erase")
def erase_command(
    path: PathOption,
    source: SourceOption = "",
    tenant: TenantOption = "",
    yes: Annotated[bool, typer.Option("--yes", help="Erase without asking (it cannot be undone)")] = False,
    data_dir: DataDir = None,
) -> None:
    """Erase the document at the path: its data key is destroyed (cannot be undone)."""
    from ledger.schemas.requests import ErasureIn
    from ledger.usecases.document_lookup import document_at_path
    from ledger.usecases.retention import erase

    def act(ctx: Any, caller: Any, target: Any) -> None:
        doc = document_at_path(ctx, caller, target)
        typer.echo(_describe(doc))
        if not yes and not typer.confirm("Erase it? Its text cannot be read again"):
            raise typer.Exit(1)
        done = erase(ctx, caller, ErasureIn(document_id=doc["document_id"]))
        if done["already_erased"]:
            typer.echo("Nothing was written: it was already erased.")
        else:
            typer.echo(f"Erased {doc['path']}: its data key was destroyed at position {done['position']}.")

    _run(data_dir, tenant, path, source, act)


@documents_app.command("hold")
def hold_command(
    path: PathOption,
    basis: Annotated[str, typer.Option("--basis", help="The legal basis (sealed in the log)")],
    source: SourceOption = "",
    tenant: TenantOption = "",
    data_dir: DataDir = None,
) -> None:
    """Place a legal hold on the document at the path: no erasure or retention scrub until released."""
    from ledger.schemas.requests import LegalHoldIn
    from ledger.usecases.document_lookup import document_at_path
    from ledger.usecases.retention import place_hold

    def act(ctx: Any, caller: Any, target: Any) -> None:
        doc = document_at_path(ctx, caller, target)
        placed = place_hold(ctx, caller, LegalHoldIn(document_ids=[doc["document_id"]], legal_basis=basis))
        typer.echo(f"Hold {placed['hold_id']} placed on {doc['path']} at position {placed['position']}.")

    _run(data_dir, tenant, path, source, act)


def register(app: typer.Typer) -> None:
    app.add_typer(documents_app, name="documents")
