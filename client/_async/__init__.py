"""The client as async code: the one source, from which `client/_sync/` is generated."""
