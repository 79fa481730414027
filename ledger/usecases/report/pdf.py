"""The PDF of a report: the system Chromium prints the HTML (`--headless --print-to-pdf`)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

PDF_TIMEOUT_S = 120


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render_pdf(html: Path, pdf: Path, timeout_s: float = PDF_TIMEOUT_S) -> bool:
    """Print `html` to `pdf` with the system Chromium; False when there is none (the HTML is
    the report either way), it failed or it took longer than `timeout_s`."""
    browser = chromium()
    if browser is None or timeout_s < 1:
        return False
    with tempfile.TemporaryDirectory(prefix="citeledger-pdf-") as profile:
        try:
            subprocess.run(  # noqa: S603 - the system browser, fixed arguments, no shell
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    f"--user-data-dir={profile}",
                    "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}",
                    html.resolve().as_uri(),
                ],
                check=True,
                capture_output=True,
                timeout=timeout_s,
            )
        except (OSError, subprocess.SubprocessError):
            return False
    return pdf.exists() and pdf.stat().st_size > 0
