"""Build the caching allocator's compiled replay (tui/core/step/_replay.c) into the wheel, where a C compiler is found.

A hatchling build hook, not another build backend: the speed-up is one C file with no Python headers (it is loaded
with ctypes, so one library serves every Python version), and hatchling already builds the rest. Where no compiler
works (none installed, `CC=false`), the wheel is the pure-Python one and the replay runs its Python reference: the
install never fails for the speed-up's sake. A wheel with the library is tagged for this platform (py3-none-PLATFORM).
An editable install (`pip install -e .`) builds the library beside its source, where the package is imported from.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("tui", "core", "step", "_replay.c")
LIBRARY = SOURCE.with_suffix(".dll" if sys.platform == "win32" else ".so")


def compiler() -> list[str]:
    """The C compiler: $CC as the user set it, else the one Python was built with, else `cc`."""
    named = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(named)


def build(source: Path, target: Path) -> str | None:
    """Compile `source` into the shared library `target`; None where it worked, else why not."""
    command = [*compiler(), "-O2", "-std=c99", "-shared", "-fPIC", "-o", str(target), str(source)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{command[0]}: {error}"
    if done.returncode != 0:
        return f"{shlex.join(command)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[:500]}"
    return None


class NativeReplay(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        self._scratch = tempfile.TemporaryDirectory()
        built = Path(self._scratch.name) / LIBRARY.name
        failed = build(root / SOURCE, built)
        if version == "editable":  # (imported from the source tree: the library goes there, whole or not at all)
            if failed:
                (root / LIBRARY).unlink(missing_ok=True)
            else:
                os.replace(built, root / LIBRARY)
        if failed:
            self.app.display_warning(f"bert-tui: the compiled replay was not built ({failed}); the Python reference "
                                     "replays instead (slower: seconds for deep models)")
        elif version != "editable":
            build_data["force_include"][str(built)] = LIBRARY.as_posix()
            build_data["pure_python"] = False
            build_data["tag"] = f"py3-none-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        self._scratch.cleanup()
