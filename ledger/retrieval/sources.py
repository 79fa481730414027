"""Markdown sources on disk: path safety and the scanner (pure file-system logic, no ledger).

Deny by default: a file is readable only when its real path lies under a
source root (the allowlist), and never under a denylisted system path, even
when a root covers it. Every refusal names its rule:

- `outside_allowlist`: a requested path that leaves the root (`..`, an absolute path elsewhere);
- `denylisted`: a system path (`/etc`, `/proc`, ... and `CITELEDGER_SOURCES_DENYLIST`);
- `symlink_escape`: a symlink (file or directory) whose real path leaves the root.

The scanner walks a root in sorted order and reads `*.md` / `*.markdown`
files within the limits (file size, file count, line length, depth, scan
time). A file it cannot use is answered with a reason, never an exception.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from ledger.config import SettingError, bounded_number
from ledger.domain.path_names import normalise, path_problem

OUTSIDE_ALLOWLIST = "outside_allowlist"
DENYLISTED = "denylisted"
SYMLINK_ESCAPE = "symlink_escape"

# Skip reasons of single files (the scan goes on).
TOO_LARGE = "too_large"
EMPTY = "empty"
NOT_UTF8 = "not_utf8"
BINARY = "binary"
LINE_TOO_LONG = "line_too_long"
UNREADABLE = "unreadable"
NOT_REGULAR_FILE = "not_regular_file"
TOO_DEEP = "too_deep"
BAD_PATH = "bad_path"
DUPLICATE_NAME = "duplicate_name"  # another spelling (NFC/NFD) of a file already synced under that name

MARKDOWN_SUFFIXES = (".md", ".markdown")
MAX_FILE_BYTES_SETTING = 64 * 1024 * 1024
HELD_IN_SCAN_BYTES = 1024 * 1024  # a larger file's text is not kept by the scan (`deferred`)
READ_BLOCK = 1024 * 1024

# System paths no source may read, whatever its root (Linux and macOS).
BUILTIN_DENYLIST: tuple[str, ...] = (
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/root",
    "/boot",
    "/run",
    "/var/lib",
    "/var/run",
    "/var/log",
    "/var/db",
    "/var/spool",
    "/usr/lib",
    "/usr/libexec",
    "/System",
    "/Library",
    "/private",
    "/Volumes/Recovery",
)


class PathRefused(Exception):
    """A path the rules refuse; `rule` names which. The message holds the path as given."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message


@dataclass(frozen=True)
class SourceLimits:
    """What one scan may cost. Every value has a default and a setting (`from_env`)."""

    # A larger file is skipped (`too_large`). A file above `HELD_IN_SCAN_BYTES` is checked while
    # streamed and read again, alone, when its turn to be recorded comes (`ScannedFile.deferred`).
    max_file_bytes: int = 16 * 1024 * 1024
    max_files: int = 20_000  # markdown files per scan; beyond it the scan stops (`truncated`)
    scan_timeout_s: float = 60.0  # wall time of one scan; past it the scan stops (`truncated`)
    max_line_chars: int = 32_768  # a longer line (say a 1 MB minified blob) skips the file
    max_depth: int = 32  # directory nesting below the root
    extra_denylist: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SourceLimits:
        env = os.environ if env is None else env
        extra = env.get("CITELEDGER_SOURCES_DENYLIST", "")
        return cls(
            max_file_bytes=int(
                _setting(
                    env, "CITELEDGER_SOURCES_MAX_FILE_BYTES", cls.max_file_bytes, 1, MAX_FILE_BYTES_SETTING
                )
            ),
            max_files=int(_setting(env, "CITELEDGER_SOURCES_MAX_FILES", cls.max_files, 1, 1_000_000)),
            scan_timeout_s=_setting(env, "CITELEDGER_SOURCES_SCAN_TIMEOUT_S", cls.scan_timeout_s, 0.01, 3600),
            max_line_chars=int(
                _setting(env, "CITELEDGER_SOURCES_MAX_LINE_CHARS", cls.max_line_chars, 80, 1 << 20)
            ),
            max_depth=int(_setting(env, "CITELEDGER_SOURCES_MAX_DEPTH", cls.max_depth, 1, 256)),
            extra_denylist=tuple(_absolute_entries(extra)),
        )

    @property
    def denylist(self) -> tuple[Path, ...]:
        return tuple(Path(os.path.normpath(p)) for p in (*BUILTIN_DENYLIST, *self.extra_denylist))


def _setting(env: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    return bounded_number(name, raw, int if isinstance(default, int) else float, low, high)


def _absolute_entries(raw: str) -> list[str]:
    entries = [part for part in raw.split(os.pathsep) if part]
    for entry in entries:
        if not os.path.isabs(entry):
            raise SettingError(f"CITELEDGER_SOURCES_DENYLIST: {entry!r} must be an absolute path")
    return entries


# -- rules -----------------------------------------------------------------------------
def _under(path: Path, prefix: Path) -> bool:
    """`path` is `prefix` or below it (both absolute and normalised); string work, as this
    runs for every entry of a scan."""
    inner, outer = str(path), str(prefix)
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def denied_by(path: Path, denylist: tuple[Path, ...]) -> Path | None:
    """The denylist entry covering `path` (absolute, normalised), if any."""
    return next((prefix for prefix in denylist if _under(path, prefix)), None)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def check_root(path: str | Path, limits: SourceLimits) -> Path:
    """A source root as given to `sources add` (and re-checked at every sync): its real
    path, if it is an existing directory that no denylist entry covers."""
    literal = Path(os.path.normpath(os.path.abspath(path)))
    real = _real(literal)
    for candidate in (literal, real):
        if denied_by(candidate, limits.denylist) is not None:
            raise PathRefused(DENYLISTED, f"{literal} is a system path no source may read")
    if not real.is_dir():
        raise PathRefused("not_a_directory", f"{literal} is not an existing directory")
    return real


def resolve_inside(root: Path, requested: str, limits: SourceLimits) -> Path:
    """A path a caller asks for inside the root `root` (a real path): refused when it leaves
    the root by `..` or by being absolute elsewhere, names a denylisted path, or goes
    through a symlink whose real path leaves the root."""
    if "\x00" in requested:
        raise PathRefused(OUTSIDE_ALLOWLIST, "a path may not contain NUL")
    lexical = Path(os.path.normpath(root / requested))  # an absolute `requested` replaces root
    if denied_by(lexical, limits.denylist) is not None:
        raise PathRefused(DENYLISTED, f"{requested} is a system path no source may read")
    if not _under(lexical, root):
        raise PathRefused(OUTSIDE_ALLOWLIST, f"{requested} is outside the source root")
    real = _real(lexical)
    if not _under(real, root):
        raise PathRefused(SYMLINK_ESCAPE, f"{requested} is a symlink whose target is outside the source root")
    if denied_by(real, limits.denylist) is not None:
        raise PathRefused(DENYLISTED, f"{requested} leads to a system path no source may read")
    return real


# -- the scanner -----------------------------------------------------------------------
@dataclass(frozen=True)
class ScannedFile:
    """One markdown file (or refused entry) of a scan. `path` is relative to the root
    (POSIX form); `text` is set when the file is usable, `skip` names why not."""

    path: str
    text: str | None = None
    skip: str | None = None
    size: int = 0
    sha256: str | None = None
    spelled: str | None = None  # the name on disk, when it is not `path`'s NFC spelling
    # A usable file too large to keep in a scan (`HELD_IN_SCAN_BYTES`): its checked real path,
    # read again by `read_markdown` when it is recorded, one large file in memory at a time.
    deferred: str | None = None


@dataclass
class ScanResult:
    files: list[ScannedFile] = field(default_factory=list)  # sorted by path
    ignored: int = 0  # entries that are not markdown
    truncated: str | None = None  # "max_files" or "scan_timeout": the scan did not see everything
    prefix: str | None = None  # the folder scanned, relative to the root (None: the whole root)


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_SUFFIXES)


def read_markdown(real: Path, relative: str, limits: SourceLimits, *, keep_large: bool = True) -> ScannedFile:
    """Read one file whose real path was checked; every problem becomes a skip reason.

    Read in `READ_BLOCK` pieces, hashed, decoded and checked (NUL, line length) as they come:
    memory is the text itself. `keep_large` False (the scan): a usable file above
    `HELD_IN_SCAN_BYTES` is answered `deferred` (its path, size and hash, no text)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(real, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:  # swapped for a symlink since the check, gone, or not ours to read
        reason = SYMLINK_ESCAPE if exc.errno == errno.ELOOP else UNREADABLE
        return ScannedFile(relative, skip=reason)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block, a device never ends
            return ScannedFile(relative, skip=NOT_REGULAR_FILE)
        if info.st_size > limits.max_file_bytes:
            return ScannedFile(relative, skip=TOO_LARGE, size=info.st_size)
        keep = keep_large or info.st_size <= HELD_IN_SCAN_BYTES
        with os.fdopen(os.dup(descriptor), "rb") as handle:
            reading = _Reading(limits, keep)
            while reading.size <= limits.max_file_bytes:
                block = handle.read(READ_BLOCK)
                if not block:
                    break
                reading.feed(block)
    except OSError:
        return ScannedFile(relative, skip=UNREADABLE)
    finally:
        os.close(descriptor)
    return reading.finish(relative, str(real))


class _Reading:
    """One file's bytes as they arrive: size, SHA-256, UTF-8 decoding, NUL and line-length
    checks (lines as `str.splitlines` cuts them; the unfinished last line is carried, at most
    `max_line_chars` of it), and, when kept, the decoded pieces."""

    def __init__(self, limits: SourceLimits, keep: bool) -> None:
        self.limits, self.keep = limits, keep
        self.size, self.digest = 0, hashlib.sha256()
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.pieces: list[str] = []
        self.not_utf8 = self.binary = self.too_long = self.visible = False
        self.first, self.tail = True, ""

    def feed(self, block: bytes, final: bool = False) -> None:
        self.size += len(block)
        self.digest.update(block)
        if self.not_utf8:
            return
        try:
            text = self.decoder.decode(block, final)
        except UnicodeDecodeError:
            self.not_utf8 = True
            self.pieces = []
            return
        if self.first and text:
            text, self.first = text.removeprefix("\ufeff"), False
        self.binary = self.binary or "\x00" in text
        self.visible = self.visible or (bool(text) and not text.isspace())
        if not self.too_long:
            lines = (self.tail + text).splitlines(keepends=True)
            self.tail = (
                ""
                if final
                or not lines
                or lines[-1] != lines[-1].rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
                else lines.pop()
            )
            limit = self.limits.max_line_chars
            self.too_long = len(self.tail) > limit or any(
                len(line.splitlines()[0]) > limit for line in lines if line
            )
        if self.keep:
            self.pieces.append(text)

    def finish(self, relative: str, real: str) -> ScannedFile:
        if self.size > self.limits.max_file_bytes:  # grew while being read
            return ScannedFile(relative, skip=TOO_LARGE, size=self.size, sha256=self.digest.hexdigest())
        self.feed(b"", final=True)
        size, digest = self.size, self.digest.hexdigest()
        problem = (
            NOT_UTF8
            if self.not_utf8
            else BINARY
            if self.binary
            else EMPTY
            if not self.visible
            else LINE_TOO_LONG
            if self.too_long
            else None
        )
        if problem is not None:
            return ScannedFile(relative, skip=problem, size=size, sha256=digest)
        if not self.keep:
            return ScannedFile(relative, size=size, sha256=digest, deferred=real)
        return ScannedFile(relative, text="".join(self.pieces), size=size, sha256=digest)


def _valid_relative(relative: str) -> bool:
    return 0 < len(relative) <= 1024 and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in relative)


def scan(
    root: Path,
    limits: SourceLimits,
    *,
    under: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ScanResult:
    """Every markdown file under the real directory `root` (or its subfolder `under`, checked
    with `resolve_inside`), in sorted order, within the limits."""
    start_dir = resolve_inside(root, under, limits) if under else root
    if not start_dir.is_dir():
        raise PathRefused("not_a_directory", f"{under} is not a directory of the source")
    prefix = PurePosixPath(*start_dir.relative_to(root).parts) if start_dir != root else None
    result = ScanResult(prefix=prefix.as_posix() if prefix is not None else None)
    deadline = clock() + limits.scan_timeout_s
    visited: set[Path] = set()
    found = 0
    # Depth-first over sorted names, so what a truncated scan saw is itself deterministic.
    pending: list[tuple[Path, PurePosixPath | None, int]] = [(start_dir, prefix, 0)]
    while pending:
        directory, relative_dir, depth = pending.pop()
        if directory in visited:
            continue
        visited.add(directory)
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            if relative_dir is not None:
                result.files.append(ScannedFile(relative_dir.as_posix(), skip=UNREADABLE))
            continue
        subdirectories: list[tuple[Path, PurePosixPath | None, int]] = []
        for entry in entries:
            if clock() > deadline:
                result.truncated = "scan_timeout"
                return _finish(result)
            relative = (relative_dir / entry.name) if relative_dir is not None else PurePosixPath(entry.name)
            shown = relative.as_posix()
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_link, is_dir = False, False
            if not is_dir and not is_markdown(entry.name):
                result.ignored += 1
                continue
            real = _real(Path(entry.path)) if is_link else Path(entry.path)
            if not _valid_relative(shown):
                result.files.append(ScannedFile(_escaped(shown), skip=BAD_PATH))
                continue
            named = normalise(shown)  # the document path: NFC, whatever the file system kept
            problem = path_problem(named)
            if problem is not None:  # a name that hides or imitates structure: skipped, named by rule
                result.files.append(ScannedFile(_escaped(shown), skip=problem[0]))
                continue
            if is_link and not _under(real, root):
                result.files.append(ScannedFile(shown, skip=SYMLINK_ESCAPE))
                continue
            if denied_by(real, limits.denylist) is not None:  # inside a root that covers it
                result.files.append(ScannedFile(shown, skip=DENYLISTED))
                continue
            if is_dir:
                if depth + 1 > limits.max_depth:
                    result.files.append(ScannedFile(shown, skip=TOO_DEEP))
                else:
                    subdirectories.append((real, relative, depth + 1))
                continue
            found += 1
            if found > limits.max_files:
                result.truncated = "max_files"
                return _finish(result)
            scanned = read_markdown(real, named, limits, keep_large=False)
            result.files.append(scanned if named == shown else replace(scanned, spelled=shown))
        pending.extend(reversed(subdirectories))
    return _finish(result)


def _escaped(name: str) -> str:
    # A refused name is shown with its code points spelled out, never as it would display.
    return name[:200].encode("unicode_escape").decode()


def _finish(result: ScanResult) -> ScanResult:
    # Two spellings of one name (NFC and NFD `café.md`) are one document path: the file
    # spelled in NFC keeps it, another is skipped under its escaped name.
    result.files.sort(key=lambda f: (f.path, f.spelled is not None))
    kept: list[ScannedFile] = []
    taken: set[str] = set()
    for file in result.files:
        if file.path in taken and file.spelled is not None:
            kept.append(ScannedFile(_escaped(file.spelled), skip=DUPLICATE_NAME))
        else:
            kept.append(file)
            taken.add(file.path)
    kept.sort(key=lambda f: f.path)
    result.files = kept
    return result
