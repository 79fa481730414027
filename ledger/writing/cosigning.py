"""The witnesses' side of checkpoints: the log's verifier key and the cosignatures on a checkpoint."""

from __future__ import annotations

import dataclasses
import logging

from ledger.tlog.checkpoints import CheckpointRecord
from ledger.tlog.cosignature import with_cosignatures
from ledger.tlog.note import verifier_key
from ledger.writing.log_reader import LogReader

log = logging.getLogger("citeledger.ledger")


class Cosigning(LogReader):
    """The verifier key and the witnesses' cosignatures on a checkpoint (a `Ledger` part)."""

    @property
    def vkey(self) -> str:
        """The log's verifier key (C2SP vkey) for its current signing key: what a
        witness is told to follow (the key name is the origin)."""
        return verifier_key(self.origin, self.signing_key().public_raw)

    def cosigned(self, record: CheckpointRecord) -> CheckpointRecord:
        """`record` with the witnesses' cosignature lines added to its note."""
        lines = self.witnessed.lines([record.seq])[record.seq]
        return dataclasses.replace(record, note=with_cosignatures(record.note, lines)) if lines else record

    def cosign(self, record: CheckpointRecord) -> CheckpointRecord:
        """Ask the configured witnesses to cosign `record` now (C2SP tlog-witness);
        returns it with every cosignature it has. Refusals are alarmed, not raised."""
        if self.cosigner is not None:
            self.cosigner.cosign(record)
        return self.cosigned(record)
