"""`citeledger` read-model commands: rebuild, digest, lag, project (worker),
verify-projections, projection-checkpoint."""

from __future__ import annotations

import json
import logging
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from cli.common import fail, ledger_config, progress_bar
from cli.options import DataDir

if TYPE_CHECKING:
    from ledger.storage.store import Store
    from projections.runner import ProjectionRunner

console = Console(stderr=True)

ProjectionNames = Annotated[
    list[str] | None,
    typer.Option("--projection", help="Only this read model (repeatable); default all"),
]


def _store(data_dir: Path | None) -> Store:
    from ledger.storage.store import Store

    return Store(ledger_config(data_dir, run_checkpointer=False))


def _runner(store: Store, batch_size: int = 1_000) -> ProjectionRunner:
    from projections.runner import ProjectionRunner

    return ProjectionRunner(store, batch_size=batch_size)


def _check_names(runner: ProjectionRunner, names: list[str] | None) -> list[str] | None:
    try:
        for name in names or []:
            runner.projection(name)
    except KeyError as exc:
        fail(str(exc.args[0]), 2)
    return names or None


def rebuild(
    data_dir: DataDir = None,
    projection: ProjectionNames = None,
    batch_size: Annotated[int, typer.Option(help="Entries per transaction")] = 2_000,
) -> None:
    """Drop read models and rebuild them from position 0, then print their digests."""

    from projections.digest import digests
    from projections.tracking import NotificationSource

    store = _store(data_dir)
    try:
        runner = _runner(store, batch_size)
        names = _check_names(runner, projection)
        head = NotificationSource(store).head_position()
        with progress_bar("rebuilding", console) as progress:
            task = progress.add_task("rebuild", total=head)
            runner.rebuild(names, progress=lambda position: progress.update(task, completed=position))
        selected = [runner.projection(n) for n in names] if names else runner.projections
        console.print(
            f"rebuilt {', '.join(p.name for p in selected)} up to position {runner.applied_position()}"
        )
        typer.echo(json.dumps(digests(selected, store)))
        if not runner.health()["ok"]:
            typer.echo("a projection stopped on an event; see `citeledger lag`", err=True)
            raise typer.Exit(1)
    finally:
        store.close()


def digest(
    data_dir: DataDir = None,
    as_of: Annotated[int | None, typer.Option("--as-of", help="Digest as of this log position")] = None,
) -> None:
    """Print one SHA-256 per read model (`name digest` lines)."""
    from projections.digest import digests

    store = _store(data_dir)
    try:
        runner = _runner(store)
        for name, value in digests(runner.projections, store, as_of=as_of).items():
            typer.echo(f"{name} {value}")
    finally:
        store.close()


def lag(data_dir: DataDir = None) -> None:
    """Per projection: applied position, head, lag and status, and the log's integrity
    findings (exit 1 if a projection has stopped or the ledger holds writes)."""
    from ledger.writing.integrity import report
    from ledger.writing.integrity_records import size_findings

    store = _store(data_dir)
    try:
        health = _runner(store).health()
        integrity = report(size_findings(store))
    finally:
        store.close()
    typer.echo(json.dumps({**health, "integrity": integrity}))
    raise typer.Exit(0 if health["ok"] and integrity["ok"] else 1)


def project(
    data_dir: DataDir = None,
    batch_size: Annotated[int, typer.Option(help="Entries per transaction")] = 500,
    poll_interval: Annotated[float, typer.Option(help="Seconds between polls without NOTIFY")] = 0.5,
    checkpoint_interval: Annotated[
        float, typer.Option(help="Seconds between signed projection checkpoints (0: never)")
    ] = 0.0,
) -> None:
    """Follow the log and keep the read models current until SIGTERM/SIGINT."""
    from ledger.storage import log_repeats
    from ledger.storage.store import Store
    from projections.worker import run_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    log_repeats.install(log_repeats.interval_from_env())
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    config = ledger_config(data_dir, run_checkpointer=False)
    store = Store(config)
    try:
        runner = _runner(store, batch_size)
        retried = runner.retry_failed()  # a restart after a fix gets another try
        console.print(f"projecting {', '.join(retried)} from the log; stop with SIGTERM")
        after_pass = None
        if checkpoint_interval > 0:
            from ledger.writing.application import Ledger
            from projections.digest_sets import DigestSets

            ledger = Ledger(config)
            digest_sets = DigestSets(ledger, runner)

            def after_pass(applied: int) -> None:
                digest_sets.maybe_issue(checkpoint_interval)

        run_worker(runner, stop, poll_s=poll_interval, after_pass=after_pass)
    finally:
        store.close()
    console.print("projection worker stopped")


def verify_projections(data_dir: DataDir = None) -> None:
    """Check the latest signed projection checkpoint: signature, log root, a scratch rebuild
    of the log prefix and the live read models; exit 1 on any difference."""
    from ledger.writing.application import Ledger
    from projections.digest_sets import DigestSets
    from projections.runner import ProjectionRunner

    config = ledger_config(data_dir, run_checkpointer=False)
    with Ledger(config) as ledger:
        digest_sets = DigestSets(ledger, ProjectionRunner(ledger.store))
        report = digest_sets.verify()
    summary = {
        "ok": report.ok,
        "checkpoint_seq": report.digest_set.seq if report.digest_set else None,
        "log_size": report.digest_set.log_size if report.digest_set else None,
        "problems": report.problems,
        # The version of each read model the signed digest matched (older checkpoints: earlier ones).
        "versions": report.versions,
    }
    typer.echo(json.dumps(summary))
    if report.ok:
        console.print(f"[green]OK[/green] read models match the log prefix of size {summary['log_size']}")
    else:
        for problem in report.problems:
            typer.echo(f"FAILED {problem}", err=True)
    raise typer.Exit(0 if report.ok else 1)


def issue_digest_set(data_dir: DataDir = None) -> None:
    """Sign the read models as of the latest log checkpoint now and print the record."""
    from ledger.writing.application import Ledger
    from projections.digest_sets import DigestSets
    from projections.runner import ProjectionRunner

    with Ledger(ledger_config(data_dir, run_checkpointer=False)) as ledger:
        ledger.issue_checkpoint()
        runner = ProjectionRunner(ledger.store)
        record = DigestSets(ledger, runner).issue()
    if record is None:
        fail("no projection checkpoint: empty log or a projection has stopped", 1)
    typer.echo(json.dumps(record.to_json()))


def register(app: typer.Typer) -> None:
    app.command("rebuild")(rebuild)
    app.command("digest")(digest)
    app.command("lag")(lag)
    app.command("project")(project)
    app.command("verify-projections")(verify_projections)
    app.command("projection-checkpoint")(issue_digest_set)
