"""The built site in headless Chromium: the start page and the config reference render with the
headings they should have, and a screenshot of each is taken (kept in $RLVR_DOCS_SHOTS when set).

Needs a Chromium binary (Debian's `chromium`; `make test` installs it as root); skipped, with the
reason, without one. DNS is mapped to nowhere, so the pages must render from local files alone."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             "/usr/bin/chromium") if p and Path(p).exists()), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (apt-get install -y chromium)")

PAGES = {
    "start": ("index.html", "rlvr", ["Get started", "Concepts", "How-to", "Reference", "Results"]),
    "config": ("reference/config.html", "Config keys",
               ["Top level", "run", "model", "data", "rollout", "grpo", "curriculum", "dynamic_sampling",
                "doctor", "agent", "eval", "distill", "Combination checks", "Engines (rollout.engine)",
                "rlvr sft keys", "rlvr eval keys"]),
}


def _chromium(user_dir: Path, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={user_dir}", "--host-resolver-rules=MAP * ~NOTFOUND",
             "--virtual-time-budget=5000", "--hide-scrollbars", "--window-size=1280,1400"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


def _headings(dom: str, level: int) -> list[str]:
    """The text of every <hN> of the rendered DOM, tags and the permalink sign stripped."""
    found = re.findall(rf"<h{level}\b[^>]*>(.*?)</h{level}>", dom, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", h)).replace("¶", "").strip() for h in found]


@pytest.mark.parametrize("name", PAGES)
def test_page_renders_its_headings_and_a_screenshot(site, name, tmp_path):
    page, title, sections = PAGES[name]
    url = (site / page).as_uri()
    dom = _chromium(tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert title in _headings(dom.stdout, 1), _headings(dom.stdout, 1)
    assert [s for s in sections if s not in _headings(dom.stdout, 2)] == [], _headings(dom.stdout, 2)
    if name == "config":
        assert "<code>grpo.group_size</code>" in dom.stdout and "<code>rollout.engine</code>" in dom.stdout
    shot = tmp_path / f"{name}.png"
    proc = _chromium(tmp_path / "profile", f"--screenshot={shot}", url)
    assert shot.is_file(), proc.stderr[-2000:]
    with Image.open(shot) as img:
        assert img.size == (1280, 1400)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is None or len(colours) > 50, "the screenshot is (nearly) blank"
    keep = os.environ.get("RLVR_DOCS_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
