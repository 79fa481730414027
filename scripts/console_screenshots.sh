#!/usr/bin/env bash
# Remake the console pictures committed under docs/console/ (the README shows them) from the
# browser test's SQLite run. The test suite itself writes screenshots only into its temporary folders.
set -euo pipefail
cd "$(dirname "$0")/.."
CITELEDGER_SCREENSHOT_DIR="$PWD/docs/console" exec .venv/bin/python -m pytest -q \
  "tests/test_console_browser.py::test_an_auditor_works_through_the_console[sqlite]" \
  "tests/test_console_browser.py::test_pages_read_on_a_phone" "$@"
