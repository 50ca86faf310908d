"""`python -m tui` runs the `bert-tui` command."""

from tui.launch import main

raise SystemExit(main())
