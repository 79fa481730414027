"""Generate the synchronous client from the async one, as httpcore does: `client/_async/*.py`
through unasync (async/await dropped, `Async…` names to their sync twins) into `client/_sync/`.

    python scripts/gen_sync_client.py          # rewrite client/_sync/
    python scripts/gen_sync_client.py --check  # exit 1 if client/_sync/ is not what it generates

tests/test_client_generated.py runs `--check`, so an edit of the generated code, or of the
async source without regenerating, fails the suite."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parents[1]
SOURCE, TARGET = "client/_async", "client/_sync"
FILES = ("client.py",)  # _sync/__init__.py is written by hand (its docstring says "generated")
HEADER = "# GENERATED from client/_async/{name} by scripts/gen_sync_client.py: edit that file, then rerun.\n"
# Beyond unasync's own (async/await, __aenter__, AsyncIterator, Async<Name> -> Sync<Name>):
REPLACEMENTS = {
    "AsyncClient": "Client",  # ours (the public name) and httpx's
    "aiter_bytes": "iter_bytes",
    "aclose": "close",
}


def generate(root: Path = ROOT) -> dict[str, str]:
    """The text of each generated file, by name (nothing written in the tree)."""
    with tempfile.TemporaryDirectory() as scratch:
        source, target = Path(scratch, "_async"), Path(scratch, "_sync")
        source.mkdir()
        for name in FILES:
            shutil.copyfile(root / SOURCE / name, source / name)
        rule = unasync.Rule(f"{source}/", f"{target}/", additional_replacements=REPLACEMENTS)
        unasync.unasync_files([str(source / name) for name in FILES], [rule])
        return {name: HEADER.format(name=name) + (target / name).read_text() for name in FILES}


def stale(root: Path = ROOT) -> list[str]:
    """The generated files that differ from what the async source generates now."""
    found = []
    for name, text in generate(root).items():
        path = root / TARGET / name
        if not path.exists() or path.read_text() != text:
            found.append(f"{TARGET}/{name}")
    return found


def write(root: Path = ROOT) -> None:
    for name, text in generate(root).items():
        (root / TARGET / name).write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    if not args.check:
        write()
        return 0
    found = stale()
    if found:
        print("out of date (run scripts/gen_sync_client.py): " + ", ".join(found), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
