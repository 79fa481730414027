"""Use case: publish a policy bundle (verbatim YAML) as the tenant's live policy, and
the one step that turns a bundle's text into the rules searches apply.

A bundle is checked completely before anything is written (`bundle_rules`: bounded YAML,
then every rule and pattern compiled), and compiled once per text: publishing, searching
under the live policy and replaying under a receipt's frozen snapshot share the cache, so
no search parses YAML. A live policy that does not load (a bundle an older version
accepted) fails closed and fast: its tenant's searches are refused naming the rule,
until a valid bundle is published.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from ledger.deadline import Deadline
from ledger.domain.events import PolicyBundlePublished
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_BUNDLE_YAML_CHARS
from ledger.policy.policy_rules import (
    MAX_BUNDLE_WILDCARDS,
    NO_POLICY,
    PolicyRuleError,
    PolicyRules,
    bundle_wildcards,
    rules_from_bundle,
)
from ledger.policy.policy_yaml import BundleLimitError, load_bundle_yaml
from ledger.schemas.requests import PolicyBundleIn
from ledger.tlog.canonical import canonical_json
from ledger.usecases.context import Caller, Result, UseCaseContext, entry_facts, record
from ledger.usecases.errors import Invalid, TooLarge, Unavailable
from ledger.usecases.policy_warm import log as warm_log
from ledger.usecases.policy_warm import warm_budget, warm_paths, warm_published
from ledger.usecases.ports import PolicyState

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
INVALID_BUNDLE = "invalid_policy_bundle"
POLICY_UNLOADABLE = "policy_unloadable"
_CACHE_SIZE = 32  # bundle texts (live policies of busy tenants, recent snapshots)


def parse_bundle(text: str, deadline: Deadline | None = None) -> dict[str, Any]:
    """The bundle as a mapping, loaded within the limits of `ledger.policy.policy_yaml`
    (anchors and aliases refused, nodes, depth, keys and scalar length bounded)."""
    if len(text) > MAX_BUNDLE_YAML_CHARS:
        raise TooLarge(
            f"bundle_yaml exceeds the {MAX_BUNDLE_YAML_CHARS} character limit", code="bundle_too_large"
        )
    try:
        document = load_bundle_yaml(text, deadline)
    except BundleLimitError as exc:
        raise Invalid(f"bundle_yaml: {exc}", code=INVALID_BUNDLE) from None
    if not isinstance(document, dict):
        raise Invalid("bundle_yaml must be a YAML mapping", code=INVALID_BUNDLE)
    return document


_compiled: OrderedDict[str, PolicyRules | tuple[str, str]] = OrderedDict()
_compiled_lock = threading.Lock()


def bundle_rules(text: str, deadline: Deadline | None = None) -> PolicyRules:
    """The compiled rules of a bundle's text, or `Invalid` naming the limit or rule it
    breaks. Refusals are cached like rules (a bundle refused once is refused at once);
    a deadline that passes mid-way is not (`DeadlineExceeded` propagates)."""
    with _compiled_lock:
        known = _compiled.get(text)
        if known is not None:
            _compiled.move_to_end(text)
    if known is None:
        try:
            known = _compile(text, deadline)
        except Invalid as exc:
            known = (exc.message, exc.code)
        with _compiled_lock:
            _compiled[text] = known
            while len(_compiled) > _CACHE_SIZE:
                _compiled.popitem(last=False)
    if isinstance(known, tuple):
        raise Invalid(known[0], code=known[1])
    return known


def _compile(text: str, deadline: Deadline | None) -> PolicyRules:
    document = parse_bundle(text, deadline)
    try:
        rules = rules_from_bundle(document)
    except PolicyRuleError as exc:
        raise Invalid(f"bundle_yaml {exc}", code=INVALID_BUNDLE) from None
    return PolicyRules(
        rules.rules,
        rules.max_top_k,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        declared_version=rules.declared_version,
    )


def live_rules(state: PolicyState | None) -> PolicyRules:
    """The rules of a tenant's live (or past) policy; one that does not load is refused
    (`Unavailable`, naming the rule) instead of being skipped: fail closed."""
    if state is None:
        return NO_POLICY
    try:
        return bundle_rules(state.bundle_yaml)
    except (Invalid, TooLarge) as exc:
        raise Unavailable(
            f"the tenant's policy bundle {state.policy_version} (sha256 {state.bundle_sha256[:16]}) "
            f"cannot be loaded: {exc.message}; publish a valid bundle to replace it",
            code=POLICY_UNLOADABLE,
        ) from None


# Every receipt carries the live bundle verbatim in its first log entry (at most 65,535
# bytes, `ledger.domain.entry_limit`): this leaves room for the query, the task and the search.
MAX_PUBLISHED_BUNDLE_BYTES = 48 * 1024


def _fits_receipts(text: str) -> None:
    size = len(canonical_json(text, checked=False)) - 2  # as the entry holds it: UTF-8, escaped
    if size > MAX_PUBLISHED_BUNDLE_BYTES:
        raise TooLarge(
            f"bundle_yaml takes {size:,} bytes in a log entry, over the {MAX_PUBLISHED_BUNDLE_BYTES:,} "
            "byte limit (every receipt carries it in an entry of at most 65,535 bytes)",
            code="bundle_too_large",
        )


def publish_policy(ctx: UseCaseContext, caller: Caller, body: PolicyBundleIn) -> Result:
    tenant = caller.tenant_id
    rules = bundle_rules(body.bundle_yaml, caller.deadline)  # the whole bundle, before any write
    wildcards = bundle_wildcards(rules.rules)
    if wildcards > MAX_BUNDLE_WILDCARDS:  # at publish only: bundles recorded before still load
        raise Invalid(
            f"bundle_yaml rules: limit max_bundle_wildcards: at most {MAX_BUNDLE_WILDCARDS} wildcards "
            f"(*, ?, **) in all path patterns together, this bundle has {wildcards}",
            code=INVALID_BUNDLE,
        )
    _fits_receipts(body.bundle_yaml)
    sha = hashlib.sha256(body.bundle_yaml.encode("utf-8")).hexdigest()
    declared = rules.declared_version
    version = body.policy_version or (
        declared if declared is not None and _IDENTIFIER.match(declared) else None
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
    result = record(
        ctx,
        caller,
        [payload],
        lambda events: {"policy_version": version, "bundle_sha256": sha, **entry_facts(events[0])},
        caller.idempotency,
    )
    # Every live path judged now, once, rather than by the searches that meet them first.
    warm_published(ctx, tenant, rules, caller.deadline)
    return result


def warm_ingested(
    ctx: UseCaseContext, tenant_id: str, paths: Iterable[str], deadline: Deadline | None = None
) -> None:
    """New document paths judged under the tenant's live bundle (when one loads)."""
    try:
        rules = live_rules(ctx.lookups.live_policy(tenant_id))
        warm_paths(rules, paths, warm_budget(deadline))
    except Unavailable:
        return  # searches refuse an unloadable bundle anyway
    except Exception:  # noqa: BLE001 - judging ahead is an optimisation: a search judges it anyway
        warm_log.warning("policy paths not judged ahead tenant=%s", tenant_id, exc_info=True)
