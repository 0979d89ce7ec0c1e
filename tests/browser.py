"""Headless Chromium for tests that look at a page the way a person does: a screenshot decoded
to pixels, and the page's own layout measured by a probe script.

Chromium comes from the Debian ``chromium`` package that ``scripts/setup.sh`` installs; a test
that needs it fails (never skips) when it is missing, because CI must run it.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is not installed: run scripts/setup.sh (as root, for apt-get)"
    return found


def _run(page: Path, *args: str) -> str:
    with tempfile.TemporaryDirectory(prefix="arena-chromium-") as profile:
        done = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, out: Path, width: int, height: int) -> np.ndarray:
    """Render ``page`` in a ``width`` × ``height`` CSS-pixel window at half scale (a quarter of
    the pixels to decode in Python); its pixels as ``height/2 × width/2 × 3``."""
    _run(
        page, f"--screenshot={out}", f"--window-size={width},{height}",
        "--force-device-scale-factor=0.5",
    )  # fmt: skip
    return decode_png(out.read_bytes())


_PROBE = """<script>
(() => {
  const wrapped = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.data.matchAll(/\\d{4}-\\d{2}-\\d{2}/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
      if (tops.size > 1) wrapped.push(m[0]);
    }
  }
  document.body.setAttribute("data-wrapped-dates", JSON.stringify(wrapped));
})();
</script>"""


def dates_wrapped(html: str, width: int) -> list[str]:
    """Every date (``YYYY-MM-DD``) the page breaks across lines in a window ``width`` wide, as
    Chromium lays it out: a probe appended to a copy of the page measures each date's lines."""
    with tempfile.TemporaryDirectory(prefix="arena-probe-") as tmp:
        page = Path(tmp) / "probe.html"
        page.write_text(html.replace("</body>", _PROBE + "</body>"))
        dom = _run(page, "--dump-dom", f"--window-size={width},800")
    found = re.search(r'data-wrapped-dates="([^"]*)"', dom)
    assert found, "the probe did not run"
    return list(json.loads(found.group(1).replace("&quot;", '"')))


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes) as RGB pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "an unexpected PNG format"
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), dtype=np.uint8)
    raw = raw.reshape(height, width * bpp + 1)
    out = np.empty((height, width * bpp), dtype=np.uint8)
    prev = np.zeros(width * bpp, dtype=np.int64)
    for y in range(height):
        kind, line = int(raw[y, 0]), raw[y, 1:].astype(np.int64)
        if kind == 0:
            row = line
        elif kind == 1:  # Sub: a running sum along the row, per channel
            row = (np.cumsum(line.reshape(width, bpp), axis=0) & 255).reshape(-1)
        elif kind == 2:  # Up
            row = (line + prev) & 255
        else:  # Average and Paeth depend on the byte just decoded: one at a time
            row = np.asarray(_unfilter(kind, line.tolist(), prev.tolist(), bpp))
        out[y] = row
        prev = row
    return out.reshape(height, width, bpp)[:, :, :3]


def _unfilter(kind: int, line: list[int], prev: list[int], bpp: int) -> list[int]:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        if kind == 3:
            line[i] = (line[i] + ((a + b) >> 1)) & 255
            continue
        c = prev[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return line
