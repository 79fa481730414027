"""Path safety and the scanner on real folders: traversal, absolute-path tricks, symlink
escapes (file and directory), the denylist under an allowlisted parent, deny by default,
the limits, and every kind of bad file (each skipped with its reason, the rest read)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.config import SettingError
from ledger.retrieval.source_registry import Source, SourceRegistry
from ledger.retrieval.sources import (
    DENYLISTED,
    OUTSIDE_ALLOWLIST,
    SYMLINK_ESCAPE,
    PathRefused,
    ScanResult,
    SourceLimits,
    check_root,
    resolve_inside,
    scan,
)
from ledger.usecases.errors import Invalid
from ledger.usecases.sources import add_source

ROOT = Path(__file__).resolve().parents[1]
LIMITS = SourceLimits(max_file_bytes=512 * 1024)  # the limit these cases were written against
SECRET = "TOP SECRET outside text"


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(root, outside): a source folder and a sibling folder that is not on the allowlist."""
    root = tmp_path / "notes"
    outside = tmp_path / "outside"
    (root / "guides").mkdir(parents=True)
    outside.mkdir()
    (root / "index.md").write_text("# Index\n\nWelcome to the notes.\n")
    (root / "guides" / "setup.markdown").write_text("# Setup\n\nInstall it.\n")
    (root / "guides" / "image.png").write_bytes(b"\x89PNG")
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    yield root.resolve(), outside.resolve()


def by_path(result: ScanResult) -> dict[str, str | None]:
    return {f.path: f.skip for f in result.files}


def refused(rule: str, fn: object, *args: object) -> None:
    with pytest.raises(PathRefused) as caught:
        fn(*args)  # type: ignore[operator]
    assert caught.value.rule == rule, caught.value


def test_traversal_and_absolute_paths_leave_the_root_and_are_refused(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    refused(OUTSIDE_ALLOWLIST, resolve_inside, root, "../outside/secret.md", LIMITS)
    refused(OUTSIDE_ALLOWLIST, resolve_inside, root, "guides/../../outside", LIMITS)
    refused(OUTSIDE_ALLOWLIST, resolve_inside, root, str(outside / "secret.md"), LIMITS)  # absolute elsewhere
    refused(OUTSIDE_ALLOWLIST, resolve_inside, root, "guides/\x00../x", LIMITS)
    refused(DENYLISTED, resolve_inside, root, "/etc/passwd", LIMITS)  # absolute into a system path
    refused(DENYLISTED, resolve_inside, root, "../" * 30 + "etc/passwd", LIMITS)
    # Inside the root, relative or absolute, is allowed.
    assert resolve_inside(root, "guides/../index.md", LIMITS) == root / "index.md"
    assert resolve_inside(root, str(root / "guides"), LIMITS) == root / "guides"
    # The scan of a subfolder goes through the same rule.
    with pytest.raises(PathRefused) as caught:
        scan(root, LIMITS, under="../outside")
    assert caught.value.rule == OUTSIDE_ALLOWLIST


def test_symlinks_leaving_the_root_are_refused_files_and_directories(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    (root / "escape.md").symlink_to(outside / "secret.md")
    (root / "escape-dir").symlink_to(outside, target_is_directory=True)
    (root / "guides" / "passwd.md").symlink_to("/etc/passwd")
    (root / "inside.md").symlink_to(root / "index.md")  # stays inside: fine
    result = scan(root, LIMITS)
    skips = by_path(result)
    assert skips["escape.md"] == SYMLINK_ESCAPE
    assert skips["escape-dir"] == SYMLINK_ESCAPE
    assert skips["guides/passwd.md"] == SYMLINK_ESCAPE
    assert skips["inside.md"] is None and skips["index.md"] is None
    assert "escape-dir/secret.md" not in skips
    assert all(SECRET not in (f.text or "") for f in result.files)
    refused(SYMLINK_ESCAPE, resolve_inside, root, "escape.md", LIMITS)
    refused(SYMLINK_ESCAPE, resolve_inside, root, "escape-dir/secret.md", LIMITS)
    with pytest.raises(PathRefused) as caught:
        scan(root, LIMITS, under="escape-dir")
    assert caught.value.rule == SYMLINK_ESCAPE


def test_a_directory_symlink_cycle_inside_the_root_ends(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    (root / "guides" / "loop").symlink_to(root, target_is_directory=True)
    result = scan(root, LIMITS)
    assert sorted(by_path(result)) == ["guides/setup.markdown", "index.md"]


def test_the_denylist_applies_even_under_an_allowlisted_parent(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    root, _ = tree
    private = root / "private"
    private.mkdir()
    (private / "keys.md").write_text("# Keys\n\nnever read\n")
    limits = replace(LIMITS, extra_denylist=(str(private),))
    result = scan(root, limits)
    assert by_path(result)["private"] == DENYLISTED
    assert "private/keys.md" not in by_path(result)
    refused(DENYLISTED, resolve_inside, root, "private/keys.md", limits)
    refused(DENYLISTED, check_root, private, limits)
    # The built-in list: real system paths, refused as roots and inside a root covering them.
    for system in ("/etc", "/proc/self", "/sys", "/dev", "/root", "/boot", "/var/lib", "/run"):
        refused(DENYLISTED, check_root, system, LIMITS)
    for mac in ("/System/Library", "/Library/Keychains", "/private/etc"):
        refused(DENYLISTED, check_root, mac, LIMITS)  # refused before asking whether it exists
    var = check_root("/var", LIMITS)  # an allowlist entry that covers a denylisted path ...
    refused(DENYLISTED, resolve_inside, var, "lib", LIMITS)  # ... does not open it
    assert by_path(scan(var, replace(LIMITS, max_depth=1)))["lib"] == DENYLISTED
    # A symlinked root is judged by where it leads.
    (tmp_path / "etc-link").symlink_to("/etc", target_is_directory=True)
    refused(DENYLISTED, check_root, tmp_path / "etc-link", LIMITS)


def test_deny_by_default_and_the_registry_file(tmp_path: Path, tree: tuple[Path, Path]) -> None:
    root, outside = tree
    data_dir = tmp_path / "data"
    registry = SourceRegistry(data_dir)
    assert registry.all() == [] and registry.get("notes", "acme") is None  # nothing is readable
    added = add_source(registry, LIMITS, "notes", str(root), "acme")
    assert added == {"name": "notes", "path": str(root), "tenant_id": "acme"}
    assert registry.get("notes", "acme") == Source("notes", str(root), "acme")
    assert registry.get("notes", "globex") is None  # another tenant's source is not there
    assert stat.S_IMODE(os.stat(data_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(registry.path).st_mode) == 0o600
    assert json.loads(registry.path.read_text())["sources"][0]["name"] == "notes"
    with pytest.raises(Invalid) as caught:
        add_source(registry, LIMITS, "etc", "/etc", "acme")
    assert caught.value.code == DENYLISTED
    with pytest.raises(Invalid) as caught:
        add_source(registry, LIMITS, "gone", str(outside / "missing"), "acme")
    assert caught.value.code == "not_a_directory"
    with pytest.raises(Invalid) as caught:
        add_source(registry, LIMITS, "notes", str(outside), "acme")
    assert caught.value.code == "source_exists"
    with pytest.raises(Invalid):
        add_source(registry, LIMITS, "../evil", str(outside), "acme")
    assert [s.name for s in registry.all()] == ["notes"]
    assert registry.remove("notes") and registry.all() == []


def test_limits_file_size_count_and_time(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    (root / "big.md").write_text("# Big\n\n" + "word " * 400 + "\n")
    small = replace(LIMITS, max_file_bytes=1_000)
    assert by_path(scan(root, small))["big.md"] == "too_large"
    assert by_path(scan(root, small))["index.md"] is None
    for index in range(5):
        (root / f"n{index}.md").write_text(f"# N{index}\n\ntext {index}\n")
    counted = scan(root, replace(LIMITS, max_files=3))
    assert counted.truncated == "max_files"
    # A folder's own files come before its subfolders', each in name order.
    assert [f.path for f in counted.files] == ["big.md", "index.md", "n0.md"]
    ticks = iter(range(1_000))  # a clock that moves one second per look
    timed = scan(root, replace(LIMITS, scan_timeout_s=4), clock=lambda: float(next(ticks)))
    assert timed.truncated == "scan_timeout"
    assert 0 < len(timed.files) < 8
    assert scan(root, LIMITS).truncated is None


def test_limit_settings_come_from_the_environment_with_their_rules() -> None:
    limits = SourceLimits.from_env(
        {
            "CITELEDGER_SOURCES_MAX_FILE_BYTES": "2048",
            "CITELEDGER_SOURCES_MAX_FILES": "7",
            "CITELEDGER_SOURCES_SCAN_TIMEOUT_S": "1.5",
            "CITELEDGER_SOURCES_DENYLIST": "/srv/secret:/opt/keys",
        }
    )
    assert (limits.max_file_bytes, limits.max_files, limits.scan_timeout_s) == (2048, 7, 1.5)
    assert Path("/srv/secret") in limits.denylist and Path("/etc") in limits.denylist
    assert SourceLimits.from_env({}) == SourceLimits()
    with pytest.raises(SettingError, match="CITELEDGER_SOURCES_MAX_FILES"):
        SourceLimits.from_env({"CITELEDGER_SOURCES_MAX_FILES": "0"})
    with pytest.raises(SettingError, match="CITELEDGER_SOURCES_SCAN_TIMEOUT_S"):
        SourceLimits.from_env({"CITELEDGER_SOURCES_SCAN_TIMEOUT_S": "soon"})
    with pytest.raises(SettingError, match="absolute"):
        SourceLimits.from_env({"CITELEDGER_SOURCES_DENYLIST": "relative/dir"})


def write_bad_files(root: Path) -> None:
    (root / "latin1.md").write_bytes("# Caf\xe9\n\nna\xefve\n".encode("latin-1"))
    (root / "empty.md").write_bytes(b"")
    (root / "blank.md").write_text("  \n\n\t\n")
    (root / "one-line.md").write_text("x" * 1_000_000)  # a 1 MB single line
    (root / "wide.md").write_text("# Wide\n\n" + "y" * 40_000 + "\n")
    (root / "nul.md").write_bytes(b"# Bin\n\x00\x01\x02\n")
    os.mkfifo(root / "pipe.md")
    (root / "dangling.md").symlink_to(root / "nowhere.md")


EXPECTED_SKIPS = {
    "latin1.md": "not_utf8",
    "empty.md": "empty",
    "blank.md": "empty",
    "one-line.md": "too_large",
    "wide.md": "line_too_long",
    "nul.md": "binary",
    "pipe.md": "not_regular_file",
    "dangling.md": "unreadable",
}


def test_each_bad_file_is_skipped_with_its_reason_and_the_rest_are_read(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    write_bad_files(root)
    result = scan(root, LIMITS)
    skips = by_path(result)
    for path, reason in EXPECTED_SKIPS.items():
        assert skips[path] == reason, path
    assert skips["index.md"] is None and skips["guides/setup.markdown"] is None
    assert result.ignored == 1  # the png
    assert [f.path for f in result.files] == sorted(f.path for f in result.files)
    # With room for 1 MB, the single line is refused for what it is.
    roomy = replace(LIMITS, max_file_bytes=2 * 1024 * 1024)
    assert by_path(scan(root, roomy))["one-line.md"] == "line_too_long"


# Runs as an unprivileged user: `chmod 000` only blocks reads for someone who is not root.
UNREADABLE_PROBE = """
import json, os, sys
from pathlib import Path
from ledger.retrieval.sources import SourceLimits, scan  # first: the interpreter may be under /root
os.setgid(65534); os.setuid(65534)
result = scan(Path(sys.argv[1]), SourceLimits())
print(json.dumps({f.path: f.skip for f in result.files}))
"""


def test_a_file_without_read_permission_is_skipped_as_unreadable() -> None:
    # A world-traversable folder (pytest's tmp_path is 0700 to root) so the probe can list it.
    with tempfile.TemporaryDirectory(prefix="citeledger-perm-") as folder:
        root = Path(folder).resolve()
        os.chmod(root, 0o755)
        (root / "open.md").write_text("# Open\n\nreadable\n")
        os.chmod(root / "open.md", 0o644)
        locked = root / "locked.md"
        locked.write_text("# Locked\n\nno\n")
        os.chmod(locked, 0o000)
        if os.geteuid() == 0:
            done = subprocess.run(
                [sys.executable, "-c", UNREADABLE_PROBE, str(root)],
                cwd=ROOT,
                env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            skips = json.loads(done.stdout)
        else:
            skips = by_path(scan(root, LIMITS))
        assert skips == {"locked.md": "unreadable", "open.md": None}
