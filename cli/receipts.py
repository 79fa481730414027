"""`citeledger receipts list|show`: what was retrieved and cited, from the terminal.

Both read a local data directory (the operator at the machine: every scope, reads recorded
as actor `cli`) or a server (`--url`/`--token`, `$CITELEDGER_URL`/`$CITELEDGER_TOKEN`, through
the Python client). The answers are the HTTP API's, so the two modes print the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli.options import DataDir
from cli.receipt_sources import ReceiptSource
from cli.receipt_sources import open_source as _source

out = Console()
err = Console(stderr=True)

receipts_app = typer.Typer(no_args_is_help=True, help="List receipts and show one, locally or from a server.")

Url = Annotated[
    str | None,
    typer.Option("--url", envvar="CITELEDGER_URL", help="Ledger base URL ($CITELEDGER_URL); else local"),
]
Token = Annotated[
    str | None, typer.Option("--token", envvar="CITELEDGER_TOKEN", help="Bearer token ($CITELEDGER_TOKEN)")
]
Tenant = Annotated[
    str, typer.Option("--tenant", help="Local mode: the tenant (default $CITELEDGER_TENANT or 'default')")
]
AsJson = Annotated[bool, typer.Option("--json", help="JSON instead of tables")]


def _moment(value: str | None, name: str, *, end: bool = False) -> str | None:
    """An RFC 3339 time, or a day as the whole UTC day (`end`: the midnight after it), as the
    API's written form (the local read models and the server take it alike)."""
    from ledger.domain.timestamps import format_timestamp, parse_bound

    if value is None:
        return None
    try:
        return format_timestamp(parse_bound(value, end=end))
    except ValueError as exc:
        err.print(f"{name} {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None


def _choice(value: str | None, name: str, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        err.print(f"{name} must be one of: {', '.join(allowed)}", markup=False, highlight=False)
        raise typer.Exit(2)
    return value


STATUSES = ("ok", "no_hit", "denied", "timeout", "error")
KINDS = ("search", "external", "replay")
MODES = ("live", "as_of_replay")


def counted(total: int, exact: bool, noun: str) -> str:
    """ "204 receipts", or "more than 1,000 receipts" when the count stopped there."""
    plural = noun if total == 1 and exact else noun + "s"
    return f"{total:,} {plural}" if exact else f"more than {total:,} {plural}"


@receipts_app.command("list")
def list_command(
    since: Annotated[str | None, typer.Option("--since", help="From this moment or day (inclusive)")] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Before this moment or day (exclusive)")
    ] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", help="e.g. citeledger-bm25@1, external:my-rag")
    ] = None,
    status: Annotated[str | None, typer.Option("--status", help=", ".join(STATUSES))] = None,
    kind: Annotated[
        str | None, typer.Option("--kind", help="search (the ledger ran it), external or replay")
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="live or as_of_replay")] = None,
    trace_id: Annotated[str | None, typer.Option("--trace-id")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id")] = None,
    document: Annotated[
        str | None, typer.Option("--document", help="Receipts citing this document id")
    ] = None,
    actor: Annotated[str | None, typer.Option("--actor", help="Who recorded it (token id)")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500, help="Receipts per page")] = 20,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The next page, as printed under a page")
    ] = None,
    order: Annotated[
        str, typer.Option("--order", help="desc: newest first (default); asc: oldest first")
    ] = "desc",
    with_queries: Annotated[
        bool, typer.Option("--queries", help="Also each receipt's query in plain (audit.content; recorded)")
    ] = False,
    query_text: Annotated[
        str | None,
        typer.Option(
            "--query-text",
            help="Only receipts whose question holds all these words (audit.content; recorded)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line")] = False,
    url: Url = None,
    token: Token = None,
    tenant: Tenant = "",
    data_dir: DataDir = None,
) -> None:
    """Receipts, newest first, one page at a time, and how many match in all."""
    filters = {
        "since": _moment(since, "--since"),
        "until": _moment(until, "--until", end=True),
        "engine": engine,
        "status": _choice(status, "--status", STATUSES),
        "kind": _choice(kind, "--kind", KINDS),
        "mode": _choice(mode, "--mode", MODES),
        "trace_id": trace_id,
        "run_id": run_id,
        "task_id": task_id,
        "document_id": document,
        "actor": actor,
        "q": query_text,
        "order": _choice(order, "--order", ("desc", "asc")),
        "content": "plain" if with_queries else None,
    }
    with _source(url, token, data_dir, tenant) as source:
        page = source.page({k: v for k, v in filters.items() if v is not None}, cursor, limit)
    receipts = page["receipts"]
    if as_json:
        for receipt in receipts:
            typer.echo(json.dumps(receipt, sort_keys=True))
        if page.get("next_cursor"):
            err.print(f"next page: --cursor {page['next_cursor']}")
        return
    total = counted(page["total"], page["total_exact"], "receipt")
    title = f"{total}, {'oldest' if order == 'asc' else 'newest'} first; {len(receipts)} on this page"
    if out.width < WIDE:
        _print_compact(title, receipts, with_queries)
    else:
        _print_table(title, receipts, with_queries)
    if page.get("next_cursor"):
        out.print(f"next page: --cursor {page['next_cursor']}")


WIDE = 120  # narrower terminals get two lines per receipt instead of a table


def _when(receipt: dict[str, Any]) -> str:
    return str(receipt["recorded_at"][:19]).replace("T", " ")


def _print_table(title: str, receipts: list[dict[str, Any]], with_queries: bool) -> None:
    table = Table(title=title)
    columns = ["recorded at (UTC)", "receipt", "kind", "engine", "status", "cited", "task", "actor"]
    for column in columns + (["query"] if with_queries else []):
        # The id stays whole (it is what `show` takes); the other columns fold to fit.
        whole = column in ("receipt", "recorded at (UTC)")
        table.add_column(column, overflow="fold", no_wrap=whole)
    for receipt in receipts:
        row = [
            _when(receipt),
            receipt["receipt_id"],
            receipt["kind"],
            receipt["engine"],
            receipt["status"],
            str(receipt["citation_count"]),
            receipt.get("task_id") or "",
            receipt["actor"],
        ]
        if with_queries:
            row.append(field_text((receipt.get("content") or {}).get("query")))
        table.add_row(*(Text(cell) for cell in row))
    out.print(table)


def _print_compact(title: str, receipts: list[dict[str, Any]], with_queries: bool) -> None:
    out.print(title)
    for receipt in receipts:
        out.print(
            f"{receipt['receipt_id']}  {_when(receipt)}  {receipt['status']:<7} "
            f"{receipt['citation_count']} cited",
            highlight=False,
        )
        task = receipt.get("task_id") or "-"
        facts = f"{receipt['kind']}  engine {receipt['engine']}  task {task}  actor {receipt['actor']}"
        if with_queries:
            facts += f"\n    query: {field_text((receipt.get('content') or {}).get('query'))}"
        out.print(f"    {facts}", highlight=False, markup=False)


def field_text(field: dict[str, Any] | None, *, none: str = "-") -> str:
    """A content field as a person reads it."""
    if field is None:
        return none
    state = field.get("state")
    if state == "plain":
        return str(field["text"])
    if state in ("erased", "expired"):
        return f"[{state} at {field.get('at') or 'an unknown time'}]"
    if state == "restricted":
        return f"[restricted: needs {field.get('required_scope')}]"
    if state == "sealed":
        return "[sealed: needs audit.content]"
    return f"[{state}]"


@receipts_app.command("show")
def show_command(
    receipt_id: Annotated[str, typer.Argument(help="The receipt")],
    no_content: Annotated[
        bool, typer.Option("--no-content", help="Do not read the query and snippets in plain")
    ] = False,
    public_key: Annotated[
        Path | None, typer.Option("--public-key", help="Trusted root public key for the proof check")
    ] = None,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
    tenant: Tenant = "",
    data_dir: DataDir = None,
) -> None:
    """One receipt: the query, each citation, the policy, the signature, the inclusion proof
    checked from the root key, the replay chain. Reading the query and snippets in plain is
    recorded (ContentRead); a token without audit.content sees them sealed. Exit 1 when the
    proof does not check."""
    from client.errors import Refused as ClientRefused

    with _source(url, token, data_dir, tenant, public_key) as source:
        try:
            detail = source.detail(receipt_id, not no_content)
        except ClientRefused as refused:
            if refused.status != 403:
                raise
            detail = source.detail(receipt_id, False)  # no audit.content: the envelope only
        if "content" not in detail or detail["content"] is None:
            detail["content"] = _sealed_content(detail)
        proof = _check_proof(source, receipt_id)
    detail["proof"] = proof
    detail["policy"] = _policy(detail["event"]["payload"].get("policy_snapshot"))
    if as_json:
        typer.echo(json.dumps(detail, indent=2, sort_keys=True))
    else:
        print_receipt(detail)
    raise typer.Exit(0 if proof["intact"] else 1)


def _sealed_content(detail: dict[str, Any]) -> dict[str, Any]:
    sealed = {"state": "sealed"}
    return {
        "query": sealed,
        "citations": [
            {"citation_id": c["citation_id"], "snippet": sealed, "heading_path": sealed}
            for c in detail["citations"]
        ],
    }


def _check_proof(source: ReceiptSource, receipt_id: str) -> dict[str, Any]:
    """The receipt's bundle against the latest signed checkpoint, checked with nothing but the
    root key: entry signature, inclusion proof, checkpoint signature, key chain."""
    from ledger.evidence.bundle import BundleError, verify_bundle

    key, where = source.root_key()
    bundle = source.bundle(receipt_id, latest=True)
    checkpoint = bundle.get("checkpoint", {})
    facts = {
        "root_key": where,
        "checkpoint_size": checkpoint.get("tree_size"),
        "root": checkpoint.get("root"),
    }
    try:
        verify_bundle(bundle, key)
    except (BundleError, KeyError, TypeError, ValueError) as exc:
        return {"intact": False, "reason": str(exc)[:300], **facts}
    return {"intact": True, "reason": None, **facts}


def _policy(snapshot: dict[str, Any] | None) -> dict[str, Any]:
    if snapshot is None:
        return {"bundle_hash": None, "rules": None, "note": "legacy receipt: no policy snapshot"}
    if snapshot.get("bundle_yaml") is None:
        return {"bundle_hash": None, "rules": [], "note": "no policy bundle was active"}
    from ledger.usecases.errors import UseCaseError
    from ledger.usecases.policy import bundle_rules

    try:  # the bounded loader and compile step every surface uses (a hostile snapshot is refused)
        rules = bundle_rules(snapshot["bundle_yaml"])
    except UseCaseError as exc:
        return {
            "bundle_hash": snapshot["bundle_hash"],
            "rules": None,
            "note": f"unparseable: {exc.message}"[:200],
        }
    return {
        "bundle_hash": snapshot["bundle_hash"],
        "captured_at": snapshot.get("captured_at"),
        "rules": [
            {
                "rule_id": rule.rule_id,
                "action": rule.action,
                "paths": list(rule.paths),
                "sensitivity": sorted(rule.sensitivity),
                "unless_scope": rule.unless_scope,
            }
            for rule in rules.rules
        ],
    }


def _sensitivity(citation: dict[str, Any]) -> str:
    rules = citation.get("rules") or {}
    set_by = (rules.get("sensitivity") or {}).get("set_by")
    return f"{citation['sensitivity']} ({set_by})" if set_by else str(citation["sensitivity"])


def print_receipt(detail: dict[str, Any]) -> None:
    content = detail["content"]
    out.print(
        f"receipt [bold]{detail['receipt_id']}[/] at position {detail['position']}, "
        f"recorded {detail['recorded_at']} by {detail['actor']}",
        soft_wrap=True,
    )
    out.print(f"engine {detail['engine']}, mode {detail['mode']}, status [bold]{detail['status']}[/]")
    out.print(f"query: {field_text(content.get('query'))}", markup=False, highlight=False, soft_wrap=True)
    by_id = {c["citation_id"]: c for c in content.get("citations", [])}
    table = Table(title=f"{len(detail['citations'])} citation(s)")
    for column in ("#", "source", "path", "heading", "lines", "score", "sensitivity (set by)", "snippet"):
        table.add_column(column, overflow="fold")
    for rank, citation in enumerate(detail["citations"], start=1):
        plain = by_id.get(citation["citation_id"], {})
        locator = citation["locator"]
        cells = (
            str(rank),
            citation.get("source") or "-",
            citation["path"],
            field_text(plain.get("heading_path")),
            f"{locator['start_line']}-{locator['end_line']}",
            citation["score"] or "-",
            _sensitivity(citation),
            field_text(plain.get("snippet")),
        )
        table.add_row(*(Text(cell) for cell in cells))  # document text is never markup
    out.print(table)
    policy = detail["policy"]
    if policy.get("note"):
        out.print(f"policy: {policy['note']}")
    if policy.get("bundle_hash"):
        out.print(f"policy bundle sha256 {policy['bundle_hash']}, {len(policy['rules'] or [])} rule(s):")
        for rule in policy["rules"] or []:
            scope = f" unless {rule['unless_scope']}" if rule["unless_scope"] else ""
            where = ", ".join(rule["paths"] + rule["sensitivity"]) or "everything"
            out.print(f"  {rule['rule_id']}: {rule['action']} {where}{scope}")
    out.print(f"signature: key {detail['kid']}, {detail['signature'][:24]}...")
    proof = detail["proof"]
    if proof["intact"]:
        out.print(
            f"proof: [green]intact[/] (entry signature, inclusion in the signed checkpoint of size "
            f"{proof['checkpoint_size']}, key chain; root key {proof['root_key']})",
            soft_wrap=True,
            highlight=False,
        )
    else:
        out.print(f"proof: [red]NOT intact[/]: {proof['reason']}", soft_wrap=True, highlight=False)
    chain = detail["replay_chain"]
    replays = ", ".join(f"{r['receipt_id']} (position {r['position']})" for r in chain["replays"]) or "none"
    out.print(
        f"replay chain: parent {chain['parent_receipt_id'] or 'none'}; replays: {replays}", soft_wrap=True
    )


def register(app: typer.Typer) -> None:
    app.add_typer(receipts_app, name="receipts")
