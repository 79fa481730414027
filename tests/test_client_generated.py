"""The sync client is generated from the async one (scripts/gen_sync_client.py, unasync), as
httpcore does: regenerating gives exactly the committed `client/_sync/`, so a hand edit of the
generated code, or an async edit not regenerated, fails here."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gen_sync_client.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_sync_client", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_sync_client_is_what_the_async_one_generates() -> None:
    # The command CI runs, as a real process on the real tree.
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_drift_either_way_is_caught(tmp_path: Path) -> None:
    script = _script()
    for part in ("client/_async/client.py", "client/_sync/client.py"):  # a copy: the tree is never written
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / part).write_text((ROOT / part).read_text())
    assert script.stale(tmp_path) == []
    generated = tmp_path / "client" / "_sync" / "client.py"
    generated.write_text(generated.read_text().replace("return data", "return dict(data)", 1))
    assert script.stale(tmp_path) == ["client/_sync/client.py"]  # a hand edit of generated code
    script.write(tmp_path)
    assert script.stale(tmp_path) == []
    source = tmp_path / "client" / "_async" / "client.py"
    source.write_text(source.read_text().replace("return data", "return dict(data)", 1))
    assert script.stale(tmp_path) == ["client/_sync/client.py"]  # an async edit not regenerated


def test_the_generated_client_is_synchronous() -> None:
    text = (ROOT / "client" / "_sync" / "client.py").read_text()
    assert text.startswith("# GENERATED from client/_async/client.py")
    asynchronous = (ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith, ast.Await)
    tree = ast.parse(text)
    assert not [node for node in ast.walk(tree) if isinstance(node, asynchronous)]
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not {name for name in names if "async" in name.lower()} and not names & {"aclose", "aiter_bytes"}
