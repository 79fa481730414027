"""The log's write machinery: sequencing and signing (`application`), group commit, idempotency,
sealing, integrity holds, witnessing, retention shredding.

Imports storage, domain, tlog, config, deadline; never the use cases.
"""
