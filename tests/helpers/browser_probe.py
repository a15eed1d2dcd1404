#!/usr/bin/python3
"""Renders a report page in headless Chromium at one window width and says what a reader
would see: does the page scroll sideways, did every image load, what is the title.

    browser_probe.py CHROMIUM REPORT_DIR WIDTH SCREENSHOT.png

Prints one JSON object: width (the window's inner width), scrollWidth (the page's),
images, broken (srcs that did not load), wide (elements reaching past the window, for the
failure message), title, h1. The report folder is copied, and the copy gets a small
script that measures after the load event; the report itself is never changed. One
Chromium run gives both the screenshot and the DOM with the measurements (--dump-dom)."""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROBE = """<script>
addEventListener("load", () => {
  const d = document.documentElement, imgs = [...document.images];
  const out = document.createElement("pre");
  out.textContent = "PROBE " + JSON.stringify({width: innerWidth, scrollWidth: d.scrollWidth,
    images: imgs.length,
    broken: imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute("src")),
    wide: [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > innerWidth + 0.5)
      .map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "")).slice(0, 8),
    title: document.title, h1: document.querySelector("h1") ? document.querySelector("h1").textContent : null});
  document.body.appendChild(out);
});
</script>"""


def main():
    chromium, report, width, screenshot = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with tempfile.TemporaryDirectory(prefix="browser-probe.") as tmp:
        page_dir = os.path.join(tmp, "report")
        shutil.copytree(report, page_dir)
        with open(os.path.join(page_dir, "index.html"), encoding="utf-8") as f:
            page = f.read()
        if "</body>" not in page:
            sys.exit("browser_probe: index.html has no </body>")
        probe = os.path.join(page_dir, "probe.html")
        with open(probe, "w", encoding="utf-8") as f:
            f.write(page.replace("</body>", PROBE + "</body>", 1))
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        # --virtual-time-budget: the DOM is dumped once the page (images too) has loaded.
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={os.path.join(tmp, 'profile')}", "--virtual-time-budget=5000",
               f"--window-size={width},2000", f"--screenshot={os.path.abspath(screenshot)}", "--dump-dom",
               "file://" + probe]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        found = re.search(r"PROBE (\{.*?\})</pre>", done.stdout)
        if not found:
            sys.exit(f"browser_probe: no measurement in Chromium's output (exit {done.returncode}): "
                     + done.stderr.strip()[-800:])
        print(json.dumps(json.loads(html.unescape(found.group(1)))))


if __name__ == "__main__":
    main()
