"""The import contracts of pyproject.toml ([tool.importlinter]) hold: layers, the offline core's
forbidden imports, no circles. Run through import-linter's own command on the real tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command is not None, "import-linter is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run(
        [command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert ", 0 broken." in done.stdout and "Contracts: 0 kept" not in done.stdout, done.stdout[-2000:]
