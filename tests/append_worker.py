"""A separate OS process that appends events and acknowledges each committed one.

Usage: python -m tests.append_worker DATA_DIR DATABASE_URL|- COUNT BATCH ACK_FILE
Each acknowledged line is `position event_id`, written and fsync'd only after
the append call returned (i.e. after commit).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ledger.config import LedgerConfig
from ledger.writing.application import Ledger
from tests.factories import TENANT, retrieval_draft


def main() -> None:
    data_dir, url, count, batch, ack_path = sys.argv[1:6]
    config = LedgerConfig(
        data_dir=Path(data_dir),
        database_url=None if url == "-" else url,
        run_checkpointer=True,
        checkpoint_interval_s=0.2,
    )
    ledger = Ledger(config)
    remaining = int(count)
    with open(ack_path, "a", encoding="ascii") as ack:
        while remaining > 0:
            size = min(int(batch), remaining)
            events = ledger.append_batch([retrieval_draft(ledger) for _ in range(size)], tenant_id=TENANT)
            for event in events:
                ack.write(f"{event.position} {event.event_id}\n")
            ack.flush()
            os.fsync(ack.fileno())
            remaining -= size
    ledger.close()


if __name__ == "__main__":
    main()
