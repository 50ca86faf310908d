"""Regenerate screenshots/*.svg from the real app (the same scenarios the snapshot tests use).

    python tests/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import os
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


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for scenario in SCREENSHOTS:
        print(asyncio.run(shoot(scenario)).relative_to(OUT.parent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
