"""`bert-tui serve`: the explorer in a web page, one explorer process per page (textual-serve, the `serve`
extra), bound to this machine's loopback address unless asked otherwise."""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence

from .common import Parser, UsageError, catalog_with_warnings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_SESSIONS = 4
MOST_SESSIONS = 64
WILDCARDS = ("0.0.0.0", "::", "")
SESSION = "--session"  # (hidden) the explorer of one page: what the server runs for each


def build_parser() -> Parser:
    parser = Parser(
        prog="bert-tui serve",
        description="Serve the explorer in a web page: each page that opens it runs an explorer of its own, "
        "which ends when the page closes. Bound to 127.0.0.1 (this machine only) unless --host names another "
        "address and --allow-remote says so: the page has no login, and anyone who reaches the address can "
        "drive the explorer (it reads presets and Hub configs, and writes presets and exports to the "
        "server's files). A page from another site cannot open a session (its Origin is refused). "
        "Needs textual-serve: pip install 'bert-tui[serve]'.",
        epilog="examples:\n  bert-tui serve\n"
        "  bert-tui serve --port 8080 --preset roberta-base\n"
        "  bert-tui serve --host 0.0.0.0 --allow-remote --public-url http://lab-gpu.example.org:8000",
    )
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"the address to listen on (default {DEFAULT_HOST}, this machine only)")
    parser.add_argument("--port", default=str(DEFAULT_PORT), help=f"the port (1 to 65535; default {DEFAULT_PORT})")
    parser.add_argument("--allow-remote", action="store_true",
                        help="listen on an address other machines can reach (refused without it)")
    parser.add_argument("--public-url", metavar="URL",
                        help="the URL browsers reach the server at, for the page's websocket (default: "
                        "http://HOST:PORT; for 0.0.0.0 or ::, this machine's host name)")
    parser.add_argument("--max-sessions", metavar="N", default=str(DEFAULT_SESSIONS),
                        help=f"explorer pages open at once, at most (1 to {MOST_SESSIONS}; default "
                        f"{DEFAULT_SESSIONS}); one more is refused until a page closes")
    parser.add_argument("--preset", metavar="NAME", help="the preset each page opens on (default bert-base-uncased)")
    parser.add_argument(SESSION, action="store_true", help=argparse.SUPPRESS)
    return parser


def _number(flag: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise UsageError(f"{flag} {text}: must be a whole number from {low} to {high}")
    return value


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.session:  # (the server checked the preset; the explorer reads the catalog itself)
        return _session(args.preset)
    if args.preset is not None and args.preset not in catalog_with_warnings().presets:
        raise UsageError(f"--preset {args.preset}: no such preset (bert-tui presets lists them)")
    port = _number("--port", args.port, 1, 65535)
    sessions = _number("--max-sessions", args.max_sessions, 1, MOST_SESSIONS)
    try:
        from ..serve import ExplorerServer, is_loopback
    except ImportError as missing:
        raise UsageError(f"bert-tui serve needs textual-serve ({missing.name or 'it'} did not import): "
                         "pip install 'bert-tui[serve]'") from None
    host = args.host.strip()
    if not is_loopback(host) and not args.allow_remote:
        raise UsageError(f"--host {host}: other machines could reach it, and the page has no login; add "
                         "--allow-remote to serve anyway, or leave --host out (127.0.0.1, this machine only)")
    public_url = args.public_url or _public_url(host, port)
    if not public_url.startswith(("http://", "https://")):
        raise UsageError(f"--public-url {public_url}: must start with http:// or https://")
    if not is_loopback(host):
        print(f"bert-tui serve: warning: listening on {host or '*'}:{port}: anyone who can reach it can drive the "
              "explorer (no login); pages open at " + public_url, file=sys.stderr)
    command = [sys.executable, "-m", "tui", "serve", SESSION, *(["--preset", args.preset] if args.preset else [])]
    server = ExplorerServer(command, host=host or "0.0.0.0", port=port, public_url=public_url,
                            max_sessions=sessions)
    try:
        server.serve()
    except OSError as error:
        raise UsageError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    return 0


def _public_url(host: str, port: int) -> str:
    """Where a browser reaches the server: its address, or for a wildcard address this machine's name (a page
    told 0.0.0.0 would open its websocket to itself)."""
    name = socket.gethostname() if host in WILDCARDS else host
    name = f"[{name}]" if ":" in name else name
    return f"http://{name}:{port}"


def _session(preset: str | None) -> int:
    """One page's explorer: textual-serve's web driver (named in the environment the server gives it) speaks
    over standard input and output, which are pipes, not a terminal."""
    from .common import resolve
    from .explore import build_parser as explorer_parser
    from .explore import explore

    selection = resolve(explorer_parser().parse_args(["--preset", preset] if preset else []))
    return explore(selection, mouse=True)
