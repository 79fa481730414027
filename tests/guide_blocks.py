"""The run-by-a-test guides (docs/auditor-guide.md, docs/operations.md): each shell block is
marked `<!-- KIND -->` (or `<!-- KIND-setup -->`, run but shown without output) and may be
followed by the ```text block of what it printed. One pattern, one reader and one writer for
both, and the start of the bash script that runs them (shared with the README's examples)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from tests.server_process import CLI_MODULE


def block_pattern(kind: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- ({kind}|{kind}-setup) -->\n```sh\n(.*?)\n```\n(\n```text\n.*?\n```\n)?", re.S)


def guide_blocks(guide: Path, kind: str) -> list[str]:
    """The code of each `kind` block, in order, after checking that every marker was taken
    and that there is exactly one `kind-setup` block."""
    text = guide.read_text(encoding="utf-8")
    found = block_pattern(kind).findall(text)
    assert text.count(f"<!-- {kind}") == len(found), "a marked block the pattern did not take"
    assert [found_kind for found_kind, _, _ in found].count(f"{kind}-setup") == 1
    return [code for found_kind, code, _ in found if found_kind == kind]


def script_start(data_dir: Path) -> list[str]:
    """A bash script's first lines: stop at the first failure, `citeledger` running this
    checkout's code, `DATA_DIR` set."""
    return [
        "set -euo pipefail",
        f'citeledger() {{ {shlex.quote(sys.executable)} -m {CLI_MODULE} "$@"; }}',
        f"export DATA_DIR={shlex.quote(str(data_dir))}",
    ]


def write_outputs(guide: Path, kind: str, outputs: list[str]) -> None:
    """Put each `kind` block's output (from a real run) under it, in order; setup blocks stay bare."""
    text = guide.read_text(encoding="utf-8")
    pieces, last, index = [], 0, 0
    for match in block_pattern(kind).finditer(text):
        pieces.append(text[last : match.start()])
        found, code = match.group(1), match.group(2)
        block = f"<!-- {found} -->\n```sh\n{code}\n```\n"
        if found == kind:
            output = outputs[index]
            index += 1
            if output.strip():
                block += f"\n```text\n{output}\n```\n"
        pieces.append(block)
        last = match.end()
    guide.write_text("".join(pieces) + text[last:], encoding="utf-8")
