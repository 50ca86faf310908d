"""The explorer (Textual): `app` (the App: global keys, the palette, help, start-up), `main_screen` (the panes
and the messages between them), `dialogs` (audit, export, open, save, help), `commands` (the palette's presets),
`widgets` (form, tree, totals, compute, key bar) and `app.tcss`. Nothing here computes a count: the core does."""
