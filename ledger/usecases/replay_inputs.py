"""What a replay starts from: the receipt under replay (`Receipt`), its frozen policy
(`snapshot_policy`) and query, the refusals when it cannot be re-run, and which position,
policy and moment count as "current".
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from ledger.domain.entries import RecordedEvent
from ledger.domain.timestamps import parse_timestamp
from ledger.policy.policy_rules import NO_POLICY, PolicyRules
from ledger.usecases.context import UseCaseContext
from ledger.usecases.errors import Invalid, NotFound, Unreplayable, UseCaseError
from ledger.usecases.policy import bundle_rules, live_rules
from ledger.usecases.ports import PolicyState, ReceiptRecord
from ledger.writing.sealing import KeyDestroyed

MISSING_SNAPSHOT = "unreplayable.missing_policy_snapshot"
NESTED_REPLAY = "unreplayable.nested_replay"
INVALID_SNAPSHOT = "unreplayable.invalid_snapshot"
ERASED = "unreplayable.erased"
ENGINE_UNAVAILABLE = "unreplayable.engine_unavailable"


@dataclass(frozen=True)
class Receipt:
    """The receipt under replay: its read-model record and its signed entry."""

    record: ReceiptRecord
    event: RecordedEvent

    @property
    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = self.event.payload
        return payload


# --- refusals ---------------------------------------------------------------------
def _load(ctx: UseCaseContext, tenant_id: str, receipt_id: str) -> Receipt:
    lookups = ctx.lookups
    record_ = lookups.receipt_record(tenant_id, receipt_id)
    if record_ is None:
        lookups.refresh()  # recorded through another process a moment ago
        record_ = lookups.receipt_record(tenant_id, receipt_id)
    event = lookups.receipt(tenant_id, receipt_id) if record_ is not None else None
    if record_ is None or event is None:
        raise NotFound("receipt")
    return Receipt(record_, event)


def snapshot_policy(receipt: Receipt) -> PolicyRules:
    """The receipt's frozen policy, refused unless its text parses and matches its hash
    (the read model's copy is checked against itself and against the signed receipt)."""
    if receipt.record.mode == "as_of_replay" or receipt.payload.get("mode") == "as_of_replay":
        raise Unreplayable("the receipt is itself a replay; replay its parent_receipt_id", code=NESTED_REPLAY)
    if not receipt.record.has_policy_snapshot or "policy_snapshot" not in receipt.payload:
        raise Unreplayable(
            "the receipt was recorded without a policy_snapshot (legacy post)", code=MISSING_SNAPSHOT
        )
    snapshot = receipt.record.policy_snapshot or {}
    bundle_hash, bundle_yaml = snapshot.get("bundle_hash"), snapshot.get("bundle_yaml")
    if snapshot != receipt.payload["policy_snapshot"]:
        raise Unreplayable("policy_snapshot differs from the signed receipt", code=INVALID_SNAPSHOT)
    if bundle_hash is None and bundle_yaml is None:
        return NO_POLICY
    if not isinstance(bundle_yaml, str) or not isinstance(bundle_hash, str):
        raise Unreplayable(
            "policy_snapshot has a hash without text or text without a hash", code=INVALID_SNAPSHOT
        )
    if hashlib.sha256(bundle_yaml.encode("utf-8")).hexdigest() != bundle_hash:
        raise Unreplayable(
            "policy_snapshot.bundle_yaml does not match its bundle_hash", code=INVALID_SNAPSHOT
        )
    try:
        return bundle_rules(bundle_yaml)  # compiled once per text, shared with search
    except UseCaseError as exc:
        raise Unreplayable(f"policy_snapshot.{exc.message}", code=INVALID_SNAPSHOT) from None


def _query(ctx: UseCaseContext, receipt: Receipt) -> str:
    try:
        return ctx.sealer.unseal(receipt.payload["query"], tenant_id=receipt.record.tenant_id)
    except KeyDestroyed:
        raise Unreplayable("the receipt's query was erased (its key was destroyed)", code=ERASED) from None


# --- positions and policies ---------------------------------------------------------
def _target(ctx: UseCaseContext, earliest: int, at_position: int | None) -> tuple[int, bool]:
    """The position replay calls "current", and whether it is the log's head."""
    size = ctx.ledger.size
    if at_position is None:
        return size, True
    if not earliest <= at_position <= size:
        raise Invalid(
            f"at_position: must be between the receipt's corpus position {earliest} and the log size {size}",
            code="invalid_at_position",
        )
    return at_position, at_position == size


def _live_policy(ctx: UseCaseContext, tenant_id: str, position: int) -> tuple[PolicyRules, str | None]:
    """The tenant's policy in force at `position` (its sha256 too)."""
    state: PolicyState | None = ctx.lookups.live_policy(tenant_id)
    if state is not None and state.position > position:
        state = ctx.lookups.policy_as_of(tenant_id, position)
    if state is None:
        return NO_POLICY, None
    return live_rules(state), state.bundle_sha256


def _moment(ctx: UseCaseContext, position: int, is_head: bool) -> dt.datetime:
    if is_head:
        return ctx.clock()
    event = ctx.ledger.get(position)
    return parse_timestamp(event.envelope["recorded_at"]) if event is not None else ctx.clock()
