"""What an auditor trusts, read from files: the ledger's root public key and witness keys.

Shared by `verify`, `verify-bundle` and `check-checkpoint`; imports no store and no web package.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cli.common import InputError, fail

if TYPE_CHECKING:
    from ledger.tlog.cosignature import Witness


def read_trusted_key(path: Path) -> bytes:
    """A trusted public key file; missing or unreadable is exit 2, not a key is exit 2 too."""
    from ledger.tlog.signing import read_public_key_file

    try:
        return read_public_key_file(path)
    except OSError as exc:
        raise InputError(f"cannot read trusted public key {path}: {exc.strerror or exc}") from None


def read_witnesses(paths: list[Path] | None, minimum: int | None) -> tuple[list[Witness], int]:
    """The trusted witnesses and the quorum; exit 2 on an unreadable key or a quorum above them."""
    from ledger.tlog.cosignature import parse_cosigner_vkey
    from ledger.tlog.note import NoteError

    witnesses = []
    for path in paths or []:
        try:
            witnesses.append(parse_cosigner_vkey(path.read_text(encoding="utf-8").strip()))
        except (OSError, UnicodeDecodeError, NoteError) as exc:
            raise InputError(f"cannot read witness key {path}: {exc}") from None
    required = minimum if minimum is not None else (1 if witnesses else 0)
    if required > len(witnesses):
        fail(f"--min-witnesses {required} but only {len(witnesses)} --witness-key given", 2)
    return witnesses, required
