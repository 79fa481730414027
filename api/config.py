"""API settings: where the ledger lives, limits, rate limits, tokens.

Everything has a default that works for the embedded store; every value can
be set from the environment (`CITELEDGER_*`), so several uvicorn workers
started from one command line share one configuration.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ledger.config import LedgerConfig, SettingError
from ledger.domain.fields import (
    MAX_BUNDLE_YAML_CHARS,
    MAX_RETENTION_DAYS,
    MAX_SEALED_TEXT_BYTES,
    MAX_SELECTED_ENTRIES,
)
from ledger.retrieval.sources import SourceLimits
from ledger.storage import log_repeats
from ledger.writing.retention import DEFAULT_FLOOR_DAYS, RetentionRules
from projections.queries import MAX_PAGE


def server_version() -> str:
    try:
        return version("citeledger")
    except PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0.0.0"


@dataclass(frozen=True)
class Limits:
    """Request limits; those the ledger also enforces are the ledger's own constants."""

    max_body_bytes: int = 4 * 1024 * 1024
    max_query_string_bytes: int = 4096
    max_query_chars: int = 16 * 1024
    max_snippet_chars: int = MAX_SEALED_TEXT_BYTES  # a snippet is sealed into one field
    max_document_chars: int = 2 * 1024 * 1024
    max_bundle_yaml_chars: int = MAX_BUNDLE_YAML_CHARS
    max_entries_per_retrieval: int = MAX_SELECTED_ENTRIES
    max_page_size: int = MAX_PAGE


@dataclass(frozen=True)
class ApiConfig:
    ledger: LedgerConfig
    limits: Limits = field(default_factory=Limits)
    rate_limit_rps: float = 5.0
    rate_limit_burst: int = 50
    request_deadline_s: float = 10.0
    redis_url: str | None = None
    tokens_file: Path | None = None  # default <data-dir>/tokens.json
    tokens_env: str | None = None  # JSON list of hashed token records
    bootstrap_token: str | None = None
    group_commit_max_events: int = 500
    embedded_projections: bool | None = None  # None: in-process on SQLite, separate runner on PostgreSQL
    retention: RetentionRules = field(default_factory=RetentionRules)
    tenant_retention_days: dict[str, int] = field(default_factory=dict)  # overrides retention.default_days
    retention_interval_s: float = 3600.0  # how often `serve` sweeps expired text; 0 disables
    log_repeat_interval_s: float = 60.0  # a repeated failure: logged once, then a count per interval
    source_limits: SourceLimits = field(default_factory=SourceLimits)  # see SourceLimits.from_env
    mcp_history_resource: bool = False  # the tenant's history of today as an MCP resource
    mcp_allowed_hosts: tuple[str, ...] = ()  # Host values /mcp answers besides localhost

    def retention_for(self, tenant: str) -> RetentionRules:
        days = self.tenant_retention_days.get(tenant)
        return self.retention if days is None else replace(self.retention, default_days=days)

    @property
    def token_path(self) -> Path:
        return self.tokens_file or self.ledger.data_dir / "tokens.json"

    @classmethod
    def from_env(cls, data_dir: str | Path | None = None, **overrides: Any) -> ApiConfig:
        """Settings from `CITELEDGER_*`; a bad value raises `SettingError` naming it and its rule."""
        env = os.environ
        ledger = LedgerConfig.from_env(data_dir, run_checkpointer=True)
        config = cls(
            ledger=ledger,
            rate_limit_rps=_number(env, "CITELEDGER_RATE_LIMIT_RPS", "5", float, 0, 1e9),
            rate_limit_burst=int(_number(env, "CITELEDGER_RATE_LIMIT_BURST", "50", int, 1, 10**9)),
            request_deadline_s=_number(env, "CITELEDGER_REQUEST_DEADLINE_S", "10", float, 0.1, 3600),
            redis_url=env.get("CITELEDGER_REDIS_URL") or None,
            tokens_file=Path(env["CITELEDGER_TOKENS_FILE"]) if env.get("CITELEDGER_TOKENS_FILE") else None,
            tokens_env=env.get("CITELEDGER_TOKENS") or None,
            bootstrap_token=env.get("CITELEDGER_BOOTSTRAP_TOKEN") or None,
            embedded_projections=(
                None
                if not env.get("CITELEDGER_EMBEDDED_PROJECTIONS")
                else env["CITELEDGER_EMBEDDED_PROJECTIONS"].lower() in ("1", "true", "yes")
            ),
            retention=RetentionRules(
                floor_days=int(
                    _number(
                        env,
                        "CITELEDGER_RETENTION_FLOOR_DAYS",
                        str(DEFAULT_FLOOR_DAYS),
                        int,
                        1,
                        MAX_RETENTION_DAYS,
                    )
                ),
                default_days=int(
                    _number(env, "CITELEDGER_RETENTION_DEFAULT_DAYS", "365", int, 1, MAX_RETENTION_DAYS)
                ),
            ),
            tenant_retention_days=_tenant_days(env.get("CITELEDGER_TENANT_RETENTION_DAYS")),
            retention_interval_s=_number(env, "CITELEDGER_RETENTION_INTERVAL_S", "3600", float, 0, 10**7),
            source_limits=SourceLimits.from_env(env),
            log_repeat_interval_s=log_repeats.interval_from_env(env),
            mcp_history_resource=_flag(env, "CITELEDGER_MCP_HISTORY_RESOURCE"),
            mcp_allowed_hosts=tuple(
                host.strip()
                for host in env.get("CITELEDGER_MCP_ALLOWED_HOSTS", "").split(",")
                if host.strip()
            ),
        )
        return replace(config, **overrides)


FLOOR_DEFAULT = str(DEFAULT_FLOOR_DAYS)
__all__ = ["ApiConfig", "Limits", "SettingError", "server_version"]


def _number(
    env: Mapping[str, str], name: str, default: str, kind: type[int] | type[float], low: float, high: float
) -> float:
    raw = env.get(name, default)
    try:
        value = kind(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r}: must be a{'n integer' if kind is int else ' number'}") from None
    if not low <= value <= high:
        raise SettingError(f"{name}={raw}: must be between {low:g} and {high:g}")
    return value


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise SettingError(f"{name}={raw!r}: must be true or false")


def _tenant_days(raw: str | None) -> dict[str, int]:
    """`CITELEDGER_TENANT_RETENTION_DAYS`: a JSON object of tenant -> retention days."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and 1 <= v <= MAX_RETENTION_DAYS for k, v in value.items()
    ):
        raise SettingError(
            f"CITELEDGER_TENANT_RETENTION_DAYS: must be a JSON object mapping tenant ids to days "
            f"(1..{MAX_RETENTION_DAYS})"
        )
    return value
