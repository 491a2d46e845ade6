"""Open the report in headless Chromium and check that every image actually renders.

Needs a Chromium binary (`apt-get install chromium`); skipped, with the reason, without one.
DNS is mapped to nowhere, so anything the page tried to fetch from outside would fail to load.
"""

import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from PIL import Image

from rlvr.report.html import write_report

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             "/usr/bin/chromium") if p and Path(p).exists()), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (apt-get install -y chromium)")

CHECK_SCRIPT = """<script>
window.addEventListener('load', () => {
  const out = document.createElement('pre');
  out.id = 'imgcheck';
  out.textContent = JSON.stringify(Array.from(document.images).map(
      img => ({ok: img.complete && img.naturalWidth > 0, width: img.naturalWidth, alt: img.alt})));
  document.body.appendChild(out);
});
</script>"""


def _chromium(user_dir: Path, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={user_dir}", "--host-resolver-rules=MAP * ~NOTFOUND",
             "--virtual-time-budget=10000", "--hide-scrollbars"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


def _run_dir(root: Path) -> Path:
    run = root / "run"
    (run / "eval").mkdir(parents=True)
    rows = [{"step": s, "reward/mean": s / 20, "reward/std": 0.2, "accuracy": s / 25,
             "frac_reward_zero_std": 0.3, "completions/mean_length": 30 + s, "entropy": 1 - s / 40,
             "kl": s / 1000, "clip_ratio/high_mean": 0.01, "timing/generate": 1.0,
             "timing/update": 0.5, "timing/step": 1.7, "group_pass_rates": [0.0, s / 20, 1.0]}
            for s in range(1, 21)]
    rows += [{"step": 10, "eval/accuracy": 0.4}, {"step": 20, "eval/accuracy": 0.6},
             {"step": 15, "event": "alarm", "name": "length_clipping", "message": "m",
              "action": "warn"}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "transcripts.jsonl").write_text(json.dumps(
        {"step": 20, "kind": "best", "problem_id": "p", "prompt": "1+1?",
         "completion": "<img src=x onerror=alert(1)>", "reward": 1.0, "advantage": 1.0}) + "\n")
    (run / "eval" / "eval.json").write_text(json.dumps({"pass@1": 0.5, "maj@4": 0.6}))
    fig = Figure(figsize=(3, 2))
    fig.add_subplot().plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    (run / "eval" / "pass_at_k.png").write_bytes(buf.getvalue())
    return run


def test_every_image_loads_in_chromium(tmp_path):
    report = write_report(_run_dir(tmp_path))
    page = report.read_text()
    n_images = len(re.findall(r"<img\b", page))
    assert n_images >= 9
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", CHECK_SCRIPT + "</body>"))
    result = _chromium(tmp_path / "profile", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="imgcheck">(.*?)</pre>', result.stdout, re.S)
    assert found, f"no probe output from chromium; stderr tail: {result.stderr[-2000:]}"
    images = json.loads(html.unescape(found.group(1)))
    assert len(images) == n_images
    assert [i for i in images if not i["ok"]] == []
    assert all(i["width"] > 50 for i in images)
    # the escaped transcript must stay text: no extra <img> element came from it
    assert "onerror" not in "".join(i["alt"] for i in images)


def test_screenshot_shows_a_rendered_page(tmp_path):
    report = write_report(_run_dir(tmp_path))
    shot = tmp_path / "shot.png"
    _chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1100,3000",
              report.as_uri())
    assert shot.is_file(), "chromium wrote no screenshot"
    with Image.open(shot) as im:
        assert im.size == (1100, 3000)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # charts, not a blank page
