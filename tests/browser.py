"""Open an HTML report in real headless Chromium (Debian's ``chromium``): the DOM after load,
each image's decoded size, console messages, and a screenshot. Tests skip where it is absent."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

PROBE = """<script>
window.addEventListener('load', () => {
  const marks = [...document.images].map(i => i.complete && i.naturalWidth > 0 ? 'ok' : 'broken');
  document.body.setAttribute('data-images', marks.join(','));
});
</script>"""


@dataclass
class Rendered:
    dom: str
    images: list[str]            # "ok" / "broken" per <img>, in page order
    console: list[str]           # console / page error lines Chromium logged
    screenshot: Path


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return found


def _run(arguments: list[str], timeout: int = 90) -> subprocess.CompletedProcess:
    base = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=5000", "--run-all-compositor-stages-before-draw"]
    return subprocess.run(base + arguments, capture_output=True, text=True, timeout=timeout)


def render(page: Path, work: Path, width: int = 1280, height: int = 2400) -> Rendered:
    """Render ``page`` (a copy with an image probe, so the original is not touched)."""
    work.mkdir(parents=True, exist_ok=True)
    probe = work / f"probe_{page.name}"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _run(["--dump-dom", probe.as_uri()])
    shot = work / f"{page.stem}.png"
    picture = _run([f"--screenshot={shot}", f"--window-size={width},{height}", probe.as_uri()])
    marks = re.search(r'data-images="([^"]*)"', dom.stdout)
    console = [line for line in (dom.stderr + picture.stderr).splitlines()
               if "CONSOLE" in line or "Uncaught" in line or "ERR_" in line]
    return Rendered(dom.stdout, marks.group(1).split(",") if marks and marks.group(1) else [], console, shot)
