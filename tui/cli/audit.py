"""`bert-tui audit`: which counting conventions reproduce a published count."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from ..plain import prose
from .common import Parser, UsageError, add_model, add_overrides, add_source, resolve


def build_parser() -> Parser:
    from ..core.count.claims import SCOPES
    from ..formats.params import FORMATS

    parser = Parser(
        prog="bert-tui audit",
        description="Explain a published parameter count: which counting conventions (biases or LayerNorm "
        "omitted, Q/K/V per head, pooler, pre-training heads, rounding, ...) reproduce it exactly. "
        "Exit 0 when one does, 1 when none does.",
        epilog="examples:\n  bert-tui audit 186828288 --preset example-40k\n  bert-tui audit 110M\n"
        "  bert-tui audit 7,113,216 --scope layer",
    )
    parser.add_argument("claim", metavar="CLAIMED", help="the published count: 186828288, 186,828,288, 110M or 0.11B")
    add_model(parser)
    add_source(parser, checkpoint=False)
    add_overrides(parser)
    parser.add_argument("--scope", choices=SCOPES, default="model", help="the whole model (default) or one encoder layer")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (plain words), json, csv or markdown (one row per reading)")
    return parser


def run(argv: Sequence[str]) -> int:
    from ..core.count.audit import audit
    from ..core.count.claims import ClaimError, parse_claim
    from ..formats.params import audit_data, audit_text

    args = build_parser().parse_args(argv)
    try:
        claim = parse_claim(args.claim)
    except ClaimError as error:
        raise UsageError(str(error)) from None
    selection = resolve(args)
    try:
        result = audit(claim, selection.config, args.scope)
    except ClaimError as error:
        raise UsageError(str(error)) from None
    data = audit_data(result, selection.config)
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif args.format in ("csv", "markdown"):
        from ..core.count.audit import describe
        from ..formats.params import rows_text

        found = list(result.matches) or ([result.nearest] if result.nearest else [])
        rows: list[dict[str, object]] = [
            {"claim": result.claim.text, "value": e.value, "rounded": e.rounded, "match": bool(result.matches),
             "conventions": "; ".join(describe(k, selection.config) for k in e.conventions)} for e in found]
        sys.stdout.write(rows_text(rows, args.format, f"claim {result.claim.text}: {selection.title}"))
    else:
        sys.stdout.write(prose(audit_text(result, selection.config, selection.title)))
    return 0 if result.matches else 1

