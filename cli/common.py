"""What every command shares: finding the ledger it works on, and one line with a
documented exit code for every expected failure (the README's Commands section).

Exit codes:
  0  done
  1  the command ran and found a problem: invalid evidence (a signature, root, proof or
     bundle that does not check), an integrity mismatch, a stopped read model
  2  bad usage or unreadable input: a malformed argument or setting, an input file that is
     missing, unreadable or not what it should be (a key that is not a key), an --out file
     that cannot be written
  3  no ledger there: the data directory or PostgreSQL schema holds none (`citeledger init`)
  4  the store cannot be used now: read-only, full, unreachable, permission denied
  70 an unexpected error (a bug): one line; CITELEDGER_TRACEBACK=1 prints the traceback
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn

import typer
from typer import _click as click  # typer's own copy of click (its exceptions, its Context)
from typer.core import TyperGroup

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from ledger.config import LedgerConfig

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_LEDGER = 3
EXIT_STORE = 4
EXIT_BUG = 70
TRACEBACK_SETTING = "CITELEDGER_TRACEBACK"


class InputError(Exception):
    """An input named on the command line is missing, unreadable or malformed (exit 2)."""


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr, then exit with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def ledger_config(data_dir: Path | None, *, create: bool = False, **overrides: Any) -> LedgerConfig:
    """The configuration of the ledger at `data_dir` (and CITELEDGER_DATABASE_URL). Unless
    `create`, it must already hold one; with `create`, a PostgreSQL schema must be empty
    or a ledger's."""
    from ledger.config import LedgerConfig
    from ledger.storage.presence import check_creatable, require_ledger

    config = LedgerConfig.from_env(data_dir, **overrides)
    if create:
        check_creatable(config)
    else:
        require_ledger(config)
    return config


def read_input(path: Path, what: str) -> bytes:
    """The bytes of an input file the user named; `InputError` (exit 2) names what is wrong."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def open_output(path: Path) -> BinaryIO:
    """An output file the user named (`--out`), opened for writing; exit 2 if it cannot be."""
    try:
        return path.open("wb")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def expected_failure(exc: BaseException) -> tuple[int, str] | None:
    """(exit code, one line) for a failure a user can act on; None for a bug."""
    from ledger.config import SettingError
    from ledger.storage.adapters import store_unavailable
    from ledger.storage.adapters.migrations import SchemaVersionError
    from ledger.storage.presence import NoLedger
    from ledger.tlog.signing import KeyFileError
    from ledger.writing.application import LedgerIntegrityError

    if isinstance(exc, (NoLedger, SchemaVersionError)):
        return EXIT_NO_LEDGER, str(exc)
    if isinstance(exc, (SettingError, InputError)):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, KeyFileError):
        return EXIT_USAGE, f"not a usable key: {exc}"
    if isinstance(exc, LedgerIntegrityError):
        return EXIT_FAILED, f"the store fails the ledger's checks: {exc}; run `citeledger verify`"
    if store_unavailable(exc):
        return EXIT_STORE, (
            f"the store cannot be used now ({_one_line(exc)}); check that the data directory is "
            "writable and has free space, or that PostgreSQL is reachable, then retry"
        )
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        return EXIT_STORE, f"cannot use{where}: {exc.strerror or exc}; check its permissions and free space"
    return None


class CommandGroup(TyperGroup):
    """The command-line app's group: no Python traceback for what a user can fix."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click.exceptions.NoArgsIsHelpError):
            raise
        except click.exceptions.UsageError as exc:  # a bad argument: one line, not a usage panel
            command = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            fail(f"{exc.format_message()} (see `{command} --help`)", EXIT_USAGE)
        except click.ClickException:
            raise
        except Exception as exc:
            failure = expected_failure(exc)
            if failure is not None:
                fail(failure[1], failure[0])
            if os.environ.get(TRACEBACK_SETTING):
                raise
            fail(
                f"unexpected {type(exc).__name__}: {_one_line(exc)} "
                f"(a bug; {TRACEBACK_SETTING}=1 shows where)",
                EXIT_BUG,
            )


def progress_bar(label: str, console: Console, done: str | None = None) -> Progress:
    """The progress bar of a long command (rebuild, sync, verify), gone when it ends: the label,
    the bar, done of total (or the `done` column template where the total is unknown), the time."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    count = MofNCompleteColumn() if done is None else TextColumn(done)
    return Progress(
        TextColumn(label), BarColumn(), count, TimeElapsedColumn(), console=console, transient=True
    )
