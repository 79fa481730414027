"""Routes grouped by domain; each module keeps its guards and helpers beside it."""
