"""The log's write machinery: sequencing and signing (`application`, with its parts
`log_reader`, `integrity_hold`, `key_rotation`, `checkpointing`, `cosigning`, `writes`),
group commit, idempotency, sealing, integrity holds, witnessing, retention shredding.

Imports storage, domain, tlog, config, deadline; never the use cases.
"""
