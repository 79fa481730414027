"""Which section and evidence answer each record-keeping duty, and what the report does not show.

Plain data, not figures: the checker does not recompute it, and nothing in it is a number.
"""

from __future__ import annotations

MAPPING: tuple[dict[str, str], ...] = (
    {
        "requirement": "EU AI Act Art. 12(1)",
        "duty": "The system allows the automatic recording of events (logs) over its lifetime.",
        "answered_by": "Coverage: every entry of the period, by type and day; the log is continuous "
        "(the consistency proof between the start and end checkpoints, every leaf hash of the range).",
        "evidence": "evidence/checkpoint-start.json, checkpoint-end.json, consistency.json, leaves.bin, "
        "entries.ndjson.zst",
    },
    {
        "requirement": "EU AI Act Art. 12(2)(a)",
        "duty": "Logs allow identifying situations that may present a risk or lead to a substantial "
        "modification.",
        "answered_by": "Retrievals (denied and no_hit rates), Access control (denials), Integrity (findings, "
        "repairs, key rotations), Policies (bundles in force and when).",
        "evidence": "entries.ndjson.zst, cited.ndjson (each finding, denial and publication with its "
        "inclusion proof)",
    },
    {
        "requirement": "EU AI Act Art. 12(2)(b)",
        "duty": "Logs facilitate post-market monitoring.",
        "answered_by": "Retrievals by engine, service, status and day; Replays and the drift they found.",
        "evidence": "entries.ndjson.zst, cited.ndjson",
    },
    {
        "requirement": "EU AI Act Art. 12(2)(c)",
        "duty": "Logs allow monitoring the operation of the system (Art. 26(5)).",
        "answered_by": "Retrievals (a reproducible sample of receipts), Access control (who read "
        "content, when).",
        "evidence": "cited.ndjson (each sampled receipt with its inclusion proof)",
    },
    {
        "requirement": "EU AI Act Art. 19(1)",
        "duty": "Providers keep the automatically generated logs for at least six months.",
        "answered_by": "Retention: the oldest receipt still held against the six-month minimum, the rules "
        "of the documents ingested, the expiries applied; Erasures and legal holds.",
        "evidence": "cited.ndjson (the oldest receipt, each expiry, erasure and hold)",
    },
    {
        "requirement": "EU AI Act Art. 26(6)",
        "duty": "Deployers keep the logs under their control for at least six months.",
        "answered_by": "Retention (as for Art. 19(1)), for the deployer's tenant only.",
        "evidence": "cited.ndjson",
    },
    {
        "requirement": "ISO/IEC 42001 A.6.2.8",
        "duty": "AI system event logs are recorded and kept.",
        "answered_by": "All sections; the report itself is appended to the log (ReportIssued).",
        "evidence": "issued.json (the ReportIssued entry, its checkpoint and inclusion proof)",
    },
)

NOT_SHOWN: tuple[str, ...] = (
    "That any answer built from the retrieved passages was correct, fair or safe: the ledger records "
    "what was retrieved and cited, not the quality of what the model said.",
    "That the tenant has no entries other than those counted: other tenants' entries appear only as "
    "leaf hashes, which do not say whose they are.",
    "Anything the systems did without recording it in the ledger.",
    "The text of restricted or erased documents, or any question unless the report was made by a "
    "holder of audit.content (and then only for the sampled receipts).",
    "Which of the earlier policy bundle or the oldest receipt is the last or the first of its kind: "
    "those two entries are proven to be in the log, not to be the only ones.",
)
