"""Use case: publish a policy bundle (verbatim YAML) as the tenant's live policy."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import yaml

from ledger.events import IDENTIFIER_PATTERN, MAX_BUNDLE_YAML_CHARS, PolicyBundlePublished
from ledger.idempotency import IdempotencyKey
from ledger.policy_rules import PolicyRuleError, rules_from_bundle
from ledger.usecases.commands import PolicyBundleIn
from ledger.usecases.context import Caller, Result, UseCaseContext, entry_facts, record
from ledger.usecases.errors import Invalid, TooLarge

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_INVALID = "invalid_policy_bundle"
MAX_BUNDLE_DEPTH = 32  # a policy is rules, not data: deeper is a mistake or an attack


def parse_bundle(text: str) -> dict[str, Any]:
    """The bundle as a mapping (`yaml.safe_load` only); refusals name the rule."""
    if len(text) > MAX_BUNDLE_YAML_CHARS:
        raise TooLarge(
            f"bundle_yaml exceeds the {MAX_BUNDLE_YAML_CHARS} character limit", code="bundle_too_large"
        )
    try:
        document = yaml.safe_load(text)
    except RecursionError:
        raise Invalid(
            f"bundle_yaml nests deeper than {MAX_BUNDLE_DEPTH} levels", code="invalid_policy_bundle"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise Invalid(f"bundle_yaml does not parse as YAML{where}", code="invalid_policy_bundle") from None
    if not isinstance(document, dict):
        raise Invalid("bundle_yaml must be a YAML mapping", code="invalid_policy_bundle")
    if _depth(document) > MAX_BUNDLE_DEPTH:
        raise Invalid(
            f"bundle_yaml nests deeper than {MAX_BUNDLE_DEPTH} levels", code="invalid_policy_bundle"
        )
    try:
        rules_from_bundle(document)  # a bundle whose rules a search could not apply is refused now
    except PolicyRuleError as exc:
        raise Invalid(f"bundle_yaml {exc}", code="invalid_policy_bundle") from None
    return document


def _depth(value: object) -> int:
    """Nesting depth of parsed YAML, iteratively (the parser already bounded it)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def publish_policy(
    ctx: UseCaseContext, caller: Caller, body: PolicyBundleIn, idempotency: IdempotencyKey | None = None
) -> Result:
    tenant = caller.tenant_id
    document = parse_bundle(body.bundle_yaml)
    sha = hashlib.sha256(body.bundle_yaml.encode("utf-8")).hexdigest()
    declared = document.get("version") or document.get("policy_version")
    version = body.policy_version or (
        str(declared) if declared is not None and _IDENTIFIER.match(str(declared)) else None
    )
    version = version or f"sha256-{sha[:16]}"
    ctx.lookups.refresh()
    current = ctx.lookups.live_policy(tenant)
    if current is not None and current.bundle_sha256 == sha and current.policy_version == version:
        return Result(
            {"policy_version": version, "bundle_sha256": sha, "position": current.position, "dedup": True},
            created=False,
        )
    payload = PolicyBundlePublished(policy_version=version, bundle_sha256=sha, bundle_yaml=body.bundle_yaml)
    return record(
        ctx,
        caller,
        [payload],
        lambda events: {"policy_version": version, "bundle_sha256": sha, **entry_facts(events[0])},
        idempotency,
    )
