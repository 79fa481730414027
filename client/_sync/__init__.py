"""The synchronous client, generated from `client/_async/` by scripts/gen_sync_client.py:
do not edit `client.py` here."""
