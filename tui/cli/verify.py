"""`bert-tui verify`: the count cross-checked against transformers' own class on the meta device."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .common import (
    EXIT_UNAVAILABLE,
    Parser,
    add_model,
    add_overrides,
    add_source,
    resolve,
)


def build_parser() -> Parser:
    parser = Parser(
        prog="bert-tui verify",
        description="Build the matching transformers class on the meta device (no weights, no download) and "
        "compare it with bert-tui parameter by parameter. Needs the verify extra: pip install 'bert-tui[verify]'. "
        "Exit 0 when they agree, 1 when they do not, 3 when torch or transformers is missing.",
    )
    add_model(parser)
    add_source(parser, checkpoint=False)
    add_overrides(parser)
    return parser


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    selection = resolve(args)
    from ..reference.verify import ExtraMissing, verify

    try:
        result = verify(selection.config)
    except ExtraMissing as error:
        print(f"bert-tui verify: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(f"{result.hf_class} of {selection.title}, transformers {result.transformers_version} on the meta device:")
    if result.agrees:
        print(f"  agree: {len(result.ours)} parameters, same names, shapes and order; total {result.our_total:,}")
        return 0
    print(f"  DISAGREE: bert-tui {result.our_total:,}, transformers {result.their_total:,}")
    for line in result.disagreements():
        print(f"  {line}")
    return 1

