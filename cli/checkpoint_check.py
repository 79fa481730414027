"""`citeledger check-checkpoint`: a tenant's auditor checks, with a token and the root
public key alone, that the log seen at the last audit is a prefix of today's.

Fetched over HTTP (`--url`/`--token`): today's checkpoint, the key chain with inclusion
proofs and the consistency proof from the kept size; everything is then verified here,
offline (`ledger.evidence.checkpoint_check`). No web framework is loaded: the HTTP client is httpx.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import EXIT_FAILED, EXIT_STORE, EXIT_USAGE, InputError, fail, read_input
from cli.trust import read_trusted_key, read_witnesses

MAX_ANSWER_BYTES = 16 * 1024 * 1024  # a key chain of thousands of rotations still fits
TIMEOUT_S = 30.0


class _Server:
    """GETs with the bearer token; a refusal or an outage ends the command with its code."""

    def __init__(self, url: str, token: str) -> None:
        import httpx

        self.http = httpx.Client(
            base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT_S
        )

    def get(self, path: str, **params: int) -> dict[str, Any]:
        import httpx
        import orjson

        try:
            with self.http.stream("GET", path, params=params) as response:
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        fail(f"GET {path}: the answer exceeds {MAX_ANSWER_BYTES} bytes", EXIT_FAILED)
                status = response.status_code
        except httpx.HTTPError as exc:
            fail(
                f"cannot reach the ledger at {self.http.base_url} ({type(exc).__name__}); retry later",
                EXIT_STORE,
            )
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            answer = None
        if status != 200 or not isinstance(answer, dict):
            error = answer.get("error") if isinstance(answer, dict) else None
            said = (
                f"{error.get('code')}: {error.get('message')}"
                if isinstance(error, dict)
                else "no JSON answer"
            )
            code = (
                EXIT_USAGE
                if status in (401, 403)
                else EXIT_STORE
                if status >= 500 or status == 408
                else EXIT_FAILED
            )
            fail(f"GET {path} answered {status} ({said})", code)
        return answer

    def close(self) -> None:
        self.http.close()


def _save(path: Path, note: str) -> None:
    """Atomically, 0600: the kept checkpoint is replaced only by a complete new one."""
    directory = path.resolve().parent
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".checkpoint-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(note)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def register(app: typer.Typer) -> None:
    @app.command("check-checkpoint")
    def check_checkpoint(
        held: Annotated[
            Path,
            typer.Option("--held", help="The checkpoint note kept from the last audit"),
        ],
        root_key: Annotated[
            Path,
            typer.Option("--root-key", "--public-key", help="The root public key, received out of band"),
        ],
        url: Annotated[
            str, typer.Option("--url", envvar="CITELEDGER_URL", help="Ledger base URL ($CITELEDGER_URL)")
        ],
        token: Annotated[
            str,
            typer.Option(
                "--token", envvar="CITELEDGER_TOKEN", help="Token with audit.read ($CITELEDGER_TOKEN)"
            ),
        ],
        witness_key: Annotated[
            list[Path] | None,
            typer.Option("--witness-key", help="A file holding a witness's vkey; repeatable"),
        ] = None,
        min_witnesses: Annotated[
            int | None,
            typer.Option(
                "--min-witnesses", min=0, help="How many of them must have cosigned (default 1 with keys)"
            ),
        ] = None,
        save: Annotated[
            bool, typer.Option("--save", help="Once verified, keep today's checkpoint in the --held file")
        ] = False,
    ) -> None:
        """Check that the log seen at the last audit (the --held checkpoint) is a prefix of
        today's: today's checkpoint and its key chain from the root key, witnesses'
        cosignatures and the RFC 9162 consistency proof, verified here. Exit 1 names what
        failed (a rollback, a fork, a rewrite, a forged or unsigned checkpoint)."""
        from ledger.evidence.checkpoint_check import CheckFailed, check_prefix, read_kept

        trusted = read_trusted_key(root_key)
        witnesses, required = read_witnesses(witness_key, min_witnesses)
        try:
            kept = read_kept(read_input(held, "kept checkpoint").decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError(f"{held}: not UTF-8 text") from None
        except CheckFailed as exc:
            raise InputError(f"{held}: {exc}") from None
        server = _Server(url, token)
        try:
            today = server.get("/v1/checkpoints/latest")["checkpoint"]
            size = today.get("tree_size") if isinstance(today, dict) else None
            if not isinstance(size, int) or size < 1:
                fail("the ledger's latest checkpoint is malformed", EXIT_FAILED)
            chain = server.get("/v1/checkpoints/key-chain", size=size).get("key_chain") or []
            proof = None
            if 0 < kept.checkpoint.size < size:
                proof = server.get(
                    "/v1/checkpoints/consistency", **{"from": kept.checkpoint.size, "to": size}
                )
        finally:
            server.close()
        try:
            result = check_prefix(
                trusted, kept, today, chain, proof, witnesses=witnesses, min_witnesses=required
            )
        except CheckFailed as exc:
            typer.echo(f"FAILED ({exc.kind}): {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        when = f" on {result.kept_time}" if result.kept_time else ""
        today_when = f", signed {result.today_time}" if result.today_time else ""
        typer.echo(
            f"OK: the log you saw{when} (size {result.kept_size}) is a prefix of today's "
            f"(size {result.today_size}{today_when})"
        )
        how = (
            f"the consistency proof ({_count(result.proof_hashes, 'hash', 'hashes')}) "
            "from your root to today's"
            if result.kept_size < result.today_size
            else "the same tree (same size and root)"
        )
        typer.echo(
            f"checked: the key chain from the root public key ({_count(result.keys, 'key', 'keys')}), "
            f"today's checkpoint signature, your checkpoint's signature, {how}"
        )
        if witnesses:
            names = ", ".join(f"{c.witness} (at {c.timestamp})" for c in result.cosignatures)
            typer.echo(
                f"cosigned by {len(result.cosignatures)} of {len(witnesses)} trusted witnesses: {names}"
            )
        if save:
            _save(held, result.today_note)
            typer.echo(
                f"saved today's checkpoint (size {result.today_size}) to {held}: keep it for the next audit"
            )
