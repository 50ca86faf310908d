"""Regenerate screenshots/*.svg from the real app (the same scenarios the snapshot tests use), and
screenshots/serve-page.png: `bert-tui serve`'s page in headless Chromium (Debian's; skipped without it).

    python tests/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.scenarios import SCREENSHOTS, Scenario  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "screenshots"


async def shoot(scenario: Scenario) -> Path:
    app = scenario.app()
    async with app.run_test(size=scenario.size) as pilot:
        await scenario.run_before()(pilot)
        path = OUT / f"{scenario.name}.svg"
        tmp = path.with_suffix(".svg.tmp")
        tmp.write_text(app.export_screenshot(title=f"bert-tui · {scenario.about}", simplify=True), encoding="utf-8")
        os.replace(tmp, path)
        return path


def shoot_page() -> Path | None:
    """The explorer served (`bert-tui serve`) in a 1400×820 headless Chromium page, once it shows its total."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("serve-page.png: no Chromium (apt-get install chromium): kept as it is", file=sys.stderr)
        return None
    from playwright.sync_api import sync_playwright

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tui", "serve", "--port", str(port)], cwd=OUT.parent,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None and server.stderr.readline().startswith("bert-tui explorer at")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 820})
            page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
            page.wait_for_timeout(6000)  # the explorer starts, paints and settles
            path = OUT / "serve-page.png"
            page.screenshot(path=str(path.with_suffix(".tmp.png")))
            os.replace(path.with_suffix(".tmp.png"), path)
            browser.close()
        return path
    finally:
        server.terminate()
        server.wait(10)


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for scenario in SCREENSHOTS:
        print(asyncio.run(shoot(scenario)).relative_to(OUT.parent))
    page = shoot_page()
    if page is not None:
        print(page.relative_to(OUT.parent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
