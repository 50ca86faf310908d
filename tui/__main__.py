"""`python -m tui` runs the `bert-tui` command."""

from tui.cli import main

raise SystemExit(main())
