"""Shared fixtures: an isolated user presets folder and Hugging Face cache, a fake Hub on 127.0.0.1, and a guard
that fails any test reaching for another network address."""

from __future__ import annotations

import gc
import itertools
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .fakehub import FakeHub, Server
from .ready import ready_first

# Collection reads the catalog too (parametrized tests): it must not see the user's real presets either. No test
# sees the user's Hugging Face cache or token, and the Hub's address is a loopback port where nothing listens:
# a test that forgot the fake Hub fails at once, in this process and in every child it starts.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="bert-tui-tests-")
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="bert-tui-cache-")
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="bert-tui-hf-")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
for _name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE"):
    os.environ.pop(_name, None)
# No test sees the caller's terminal either: help and prose wrap as in a pipe of 80 columns, whatever the terminal
# the suite runs in (a test about another width sets its own).
os.environ["COLUMNS"], os.environ["LINES"] = "80", "24"


# A worker's heap holds every test module, hypothesis and Textual's bounded caches (which keep widgets of earlier
# apps): at the interpreter's default thresholds (700 allocations) a worker spent ~14 % of its CPU collecting,
# ~120 ms a full collection. Collecting less often is the same suite with less of that (a third of the explorer's
# tests: 3.5 s → 1.4 s of collection a worker, 44.5 s → 42.1 s). The explorer's own pause of the collector at
# start-up is unaffected.
gc.set_threshold(50_000, 20, 20)


@pytest.hookimpl(tryfirst=True)  # (before xdist reads the groups)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """One worker takes every snapshot test. syrupy (4.8.0, pinned by pytest-textual-snapshot) looks for unused
    snapshots on each worker that used any, matching each snapshot another worker used against every test this one
    ran (snapshots × tests, a path resolved each time): 5–6 s of CPU on each of three workers after the last test
    of every run. A worker that used no snapshot looks at none; the one that used them all finds none unused."""
    for item in items:
        if "snap_compare" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("snapshots"))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """One full collection, then what is left frozen: pytest's check for exceptions raised in finalizers collects
    five times more as the session ends (to surface them), each a walk over a worker's whole heap (torch and
    transformers on one of them); what the first collection freed has surfaced by then."""
    gc.collect()
    gc.freeze()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pytest's options in pyproject.toml): one worker more than the cores this process may use. The
    explorer's tests spend part of their time asleep (Textual's Pilot waits for idle in 20 ms steps), which one
    more worker fills: on 2 cores the suite took 230 s with 3 workers against 262 s with 2, same commit."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_blocked: list[str] = []
_connect = socket.socket.connect
_getaddrinfo = socket.getaddrinfo


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
        _blocked.append(f"connect {address}")
        raise ConnectionRefusedError(f"tests may not reach {address}")
    _connect(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host not in LOOPBACK and host is not None:
        _blocked.append(f"resolve {host}")
        raise socket.gaierror(f"tests may not resolve {host}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.getaddrinfo = _guarded_getaddrinfo


@pytest.fixture(autouse=True)
def no_network() -> Iterator[None]:
    """Any attempt to reach beyond the loopback fails the test that made it."""
    _blocked.clear()
    yield
    if _blocked:
        pytest.fail(f"a test reached for the network: {_blocked}")


@pytest.fixture(autouse=True)
def explorer_ready_first(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Pilot test gets the explorer once its fields are mounted (a condition, not a pause), except the
    tests of start-up itself (`@pytest.mark.startup`), which look at what comes before."""
    if request.node.get_closest_marker("startup") is None:
        from tui.explorer.app import BertTuiApp

        monkeypatch.setattr(BertTuiApp, "run_test", ready_first(BertTuiApp.run_test))


@pytest.fixture(scope="session")
def _xdg_homes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new empty folder for each test, numbered here: `mktemp` for each would scan every earlier one (quadratic
    in the number of tests)."""
    base = tmp_path_factory.mktemp("xdg")
    return (base / str(number) for number in itertools.count())


@pytest.fixture(autouse=True)
def isolated_user_presets(_xdg_homes: Iterator[Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point XDG_CONFIG_HOME at an empty folder of the test's own so that no test reads or writes the real user
    presets (nor another test's)."""
    home = next(_xdg_homes)
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "bert-tui" / "presets"


@pytest.fixture
def fake_hub(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A fake Hub on a random loopback port, an empty Hugging Face cache and header cache, for this test only.

    Children started by the test see it through the environment; this process's huggingface_hub (which reads
    the environment once, at import) through its constants."""
    hub = FakeHub()
    server = Server(hub)
    home = tmp_path_factory.mktemp("hf-home")
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    try:
        import huggingface_hub.constants as constants

        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    except ImportError:
        pass
    yield hub
    server.stop()


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The explorer launched from main() believes it has a terminal (without one it prints the count instead;
    pytest's own capture replaces sys.stdout during the test, so the check itself is replaced)."""
    import tui.cli.explore

    monkeypatch.setattr(tui.cli.explore, "terminal", lambda: (True, True))
