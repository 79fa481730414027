"""The ledger's side of C2SP tlog-witness: send each new checkpoint, with a
consistency proof from the size the witness last cosigned, to every configured
witness and keep the cosignatures it returns (`ledger.storage.witnessed`).

Witnesses are asked off the write path (the checkpointer thread, or a bundle
that needs a cosigned checkpoint). A refusal is never ignored: every one is
logged at ERROR and kept in `alarms` (shown in healthz); a witness that holds a
larger tree than the log (409 naming a size the log does not reach) or finds the
log inconsistent with what it cosigned (422) is evidence of a rollback or a
fork, and puts the ledger on hold (`ledger.writing.integrity`).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from ledger.config import WitnessEndpoint
from ledger.storage.witnessed import WitnessedSizes
from ledger.tlog.checkpoints import CheckpointRecord
from ledger.tlog.cosignature import Cosignature, open_cosignatures
from ledger.tlog.note import NoteError
from ledger.tlog.witness_protocol import SIZE_CONTENT_TYPE, format_add_checkpoint
from ledger.writing.integrity import Finding

log = logging.getLogger("citeledger.witnessing")

MAX_ATTEMPTS = 3  # a stale view of the witness's size is corrected by its 409 once
MAX_ALARMS = 100
_SIZE_RE = re.compile(r"(0|[1-9][0-9]{0,19})\n?")


class Cosigner:
    def __init__(
        self,
        endpoints: list[WitnessEndpoint],
        witnessed: WitnessedSizes,
        *,
        consistency_proof: Callable[[int, int], list[bytes]],
        log_size: Callable[[], int],
        on_finding: Callable[[Finding], None],
        timeout_s: float = 5.0,
    ) -> None:
        self.endpoints = endpoints
        self.witnessed = witnessed
        self._proof = consistency_proof
        self._log_size = log_size
        self._on_finding = on_finding
        self._http = httpx.Client(timeout=timeout_s, follow_redirects=False)
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, len(endpoints)), thread_name_prefix="citeledger-witness"
        )
        self.alarms: deque[dict[str, Any]] = deque(maxlen=MAX_ALARMS)

    def cosign(self, record: CheckpointRecord) -> list[Cosignature]:
        """Ask every witness (in parallel) to cosign `record`; the cosignatures obtained."""
        results = list(self._pool.map(lambda endpoint: self._cosign_one(endpoint, record), self.endpoints))
        return [result for result in results if result is not None]

    def _alarm(self, endpoint: WitnessEndpoint, status: int | None, message: str) -> None:
        log.error("witness %s refused checkpoint: %s", endpoint.witness.name, message)
        self.alarms.append(
            {
                "witness": endpoint.witness.name,
                "status": status,
                "message": message[:300],
                "at": dt.datetime.now(dt.UTC).isoformat(),
            }
        )

    def _cosign_one(self, endpoint: WitnessEndpoint, record: CheckpointRecord) -> Cosignature | None:
        name = endpoint.witness.name
        old = self.witnessed.size_of(name)
        if old >= record.tree_size:
            if old > self._log_size():
                self._rolled_back(endpoint, old)
            return None  # it already cosigned this size or a newer checkpoint
        for _ in range(MAX_ATTEMPTS):
            if old > record.tree_size:
                return None  # it holds a newer checkpoint of this log (another process sent it)
            # At the same size (a 409 said so) no proof: the witness compares the roots.
            proof = self._proof(old, record.tree_size) if 0 < old < record.tree_size else []
            try:
                response = self._http.post(
                    endpoint.url + "/add-checkpoint",
                    content=format_add_checkpoint(old, proof, record.note),
                    headers={"Content-Type": "text/plain; charset=utf-8"},
                )
            except httpx.HTTPError as exc:
                self._alarm(endpoint, None, f"unreachable ({type(exc).__name__})")
                return None
            if response.status_code == 200:
                try:
                    found = open_cosignatures(record.note + response.text, [endpoint.witness])
                except NoteError as exc:
                    found, problem = [], str(exc)
                else:
                    problem = "no cosignature by its key in the answer"
                if not found:
                    self._alarm(endpoint, 200, problem)
                    return None
                self.witnessed.record(name, record.seq, record.tree_size, record.root, found[0].line)
                return found[0]
            if response.status_code == 409 and response.headers.get("content-type", "").startswith(
                SIZE_CONTENT_TYPE
            ):
                match = _SIZE_RE.fullmatch(response.text)
                if match is None:
                    self._alarm(endpoint, 409, "answered 409 without a tree size")
                    return None
                held = int(match.group(1))
                if held > self._log_size():
                    self._rolled_back(endpoint, held)
                    return None
                old = held
                continue
            message = response.text.strip().split("\n", 1)[0][:200]
            self._alarm(endpoint, response.status_code, f"{response.status_code}: {message}")
            if response.status_code == 422:
                self._on_finding(
                    Finding(
                        "witness_disagrees",
                        f"witness:{name}:{old}",
                        f"witness {name} finds the log inconsistent with the checkpoint of size {old} "
                        f"it cosigned ({message})",
                        {
                            "witness": name,
                            "witness_size": old,
                            "checkpoint_seq": record.seq,
                            "checkpoint_size": record.tree_size,
                            "checkpoint_root": record.root.hex(),
                            "status": 422,
                        },
                    )
                )
            return None
        self._alarm(endpoint, 409, "the witness's size kept changing")
        return None

    def _rolled_back(self, endpoint: WitnessEndpoint, held: int) -> None:
        name = endpoint.witness.name
        log_size = self._log_size()
        self._alarm(endpoint, 409, f"it cosigned a tree of size {held}, larger than the log")
        self._on_finding(
            Finding(
                "log_shorter_than_witnessed",
                f"witness:{name}:{held}",
                f"the log has {log_size} entries but witness {name} cosigned a checkpoint of size {held}",
                {"witness": name, "witness_size": held, "log_size": log_size, "status": 409},
            )
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
