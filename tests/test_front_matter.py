"""A synced file's front matter is read by the same bounded loader as a policy bundle: a
file's author is not trusted, so an alias bomb in 4 KiB is refused, not expanded."""

from __future__ import annotations

import pytest

from ledger.policy.front_matter import FrontMatterRefused, file_rules


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        refs = ",".join(f"*a{level - 1}" for _ in range(9))
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "---\n" + "\n".join(lines) + "\n---\n# Title\n\nBody.\n"


def test_an_alias_bomb_in_front_matter_is_refused() -> None:
    # 9**4 strings if it were expanded (yaml.safe_load expands it; 9 levels would exhaust memory)
    with pytest.raises(FrontMatterRefused) as refused:
        file_rules(_bomb(4), None, None, 365)
    assert refused.value.reason == "bad_front_matter" and "alias" in str(refused.value).lower()


def test_plain_front_matter_still_narrows() -> None:
    rules = file_rules("---\nsensitivity: restricted\nretention_days: 30\n---\n# T\n", None, 400, 365)
    assert (rules.sensitivity, rules.retention_days) == ("restricted", 30)
