"""The run-by-a-test guides (docs/auditor-guide.md, docs/operations.md): each shell block is
marked `<!-- KIND -->` (or `<!-- KIND-setup -->`, run but shown without output) and may be
followed by the ```text block of what it printed. One pattern and one writer for both."""

from __future__ import annotations

import re
from pathlib import Path


def block_pattern(kind: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- ({kind}|{kind}-setup) -->\n```sh\n(.*?)\n```\n(\n```text\n.*?\n```\n)?", re.S)


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
