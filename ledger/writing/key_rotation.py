"""The signing key's chain in the log: the genesis entry and rotations, each announced by an entry
signed with the key before it.
"""

from __future__ import annotations

import logging

from ledger.domain.entries import SYSTEM_TENANT, EventDraft, RecordedEvent, prepare
from ledger.domain.events import SigningKeyRotated
from ledger.domain.keychain import possession_message
from ledger.tlog.signing import SigningKey, b64, kid_for, unb64
from ledger.writing.log_reader import LogReader
from ledger.writing.writes import Write

log = logging.getLogger("citeledger.ledger")


class KeyRotation(LogReader):
    """Appending the genesis key entry and rotations of the signing key (a `Ledger` part)."""

    def _append_genesis(self) -> None:
        root_kid = kid_for(self.root_public_key)
        key = self.keydir.load(root_kid)
        self._append_key_event(key, previous=None)

    def _append_key_event(self, new_key: SigningKey, previous: SigningKey | None) -> RecordedEvent:
        public_b64 = b64(new_key.public_raw)
        previous_kid = previous.kid if previous else None
        payload = SigningKeyRotated(
            new_kid=new_key.kid,
            public_key=public_b64,
            previous_kid=previous_kid,
            possession_signature=new_key.sign(possession_message(new_key.kid, public_b64, previous_kid)),
        )
        draft = EventDraft.of(payload, tenant_id=SYSTEM_TENANT, actor="citeledger")
        item = prepare(draft, system=True)
        with self._lock:
            if previous is None:
                self._signing_key = new_key  # genesis is self-signed
            try:
                outcomes, notifications = self._commit_locked(
                    [Write([item])], only_at=1 if previous is None else None
                )
                if outcomes[0].error is not None:
                    raise outcomes[0].error
                committed = outcomes[0].events
            except Exception:
                self._signing_key = None
                raise
            for listener in self._commit_listeners if committed else ():
                try:
                    listener(notifications)
                except Exception:
                    log.exception("commit listener failed")
            if not committed:  # another process wrote the genesis entry first
                self._signing_key = None
                first = self.get(1)
                assert first is not None
                return first
            self._absorb_key_after_commit(committed[0])
            return committed[0]

    def _absorb_key_after_commit(self, event: RecordedEvent) -> None:
        payload = event.payload
        self.public_keys[payload["new_kid"]] = unb64(payload["public_key"])
        self.key_introduced_at[payload["new_kid"]] = event.position
        self._signing_kid = payload["new_kid"]
        self._signing_key = None
        self._name_active_key(payload["new_kid"])

    def rotate_signing_key(self) -> RecordedEvent:
        """Introduce a new signing key, announced by an event signed with the old one."""
        with self._lock:
            self._refuse_if_held()
            self.sync()
            previous = self.signing_key()
            return self._append_key_event(self.keydir.generate(), previous)
