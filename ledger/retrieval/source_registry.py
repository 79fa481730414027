"""The allowlist: named source folders, each bound to a tenant, kept in
`<data-dir>/sources.json` (file 0600, directory 0700). Written whole to a
temporary file and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

SOURCE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
MAX_SOURCES = 1_000
_NAME = re.compile(SOURCE_NAME_PATTERN)
_FILE_NAME = "sources.json"


class RegistryError(ValueError):
    """The registry file or an entry breaks a rule; the message names it."""


@dataclass(frozen=True)
class Source:
    name: str
    path: str  # the real path of the root, as checked when added
    tenant_id: str
    # Every synced file's rules (None: `internal`, the tenant's retention); a file's front
    # matter may narrow them (`ledger.policy.front_matter`).
    sensitivity: str | None = None
    retention_days: int | None = None


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


class SourceRegistry:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / _FILE_NAME
        self._lock = threading.Lock()

    def all(self) -> list[Source]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []  # deny by default: no file, no source
        try:
            entries = json.loads(raw)["sources"]
            sources = [
                Source(
                    str(e["name"]),
                    str(e["path"]),
                    str(e["tenant_id"]),
                    e.get("sensitivity"),
                    e.get("retention_days"),
                )
                for e in entries
            ]
        except (ValueError, KeyError, TypeError):
            raise RegistryError(f"{self.path}: not a sources file") from None
        return sorted(sources, key=lambda s: s.name)

    def get(self, name: str, tenant_id: str) -> Source | None:
        """The tenant's source of that name; another tenant's is None, like an unknown one."""
        return next((s for s in self.all() if s.name == name and s.tenant_id == tenant_id), None)

    def add(self, source: Source) -> None:
        if not valid_name(source.name):
            raise RegistryError(f"source name {source.name!r} must match {SOURCE_NAME_PATTERN}")
        with self._lock:
            sources = self.all()
            if any(s.name == source.name for s in sources):
                raise RegistryError(f"a source named {source.name!r} exists; remove it first")
            if len(sources) >= MAX_SOURCES:
                raise RegistryError(f"at most {MAX_SOURCES} sources")
            self._write([*sources, source])

    def remove(self, name: str) -> bool:
        with self._lock:
            sources = self.all()
            kept = [s for s in sources if s.name != name]
            if len(kept) == len(sources):
                return False
            self._write(kept)
            return True

    def _write(self, sources: list[Source]) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        body = json.dumps(
            {"sources": [s.__dict__ for s in sorted(sources, key=lambda s: s.name)]}, indent=2
        ).encode()
        descriptor, temporary = tempfile.mkstemp(dir=self.data_dir, prefix=".sources-", suffix=".tmp")
        try:
            os.fchmod(descriptor, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
