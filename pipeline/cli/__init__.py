"""The `tracehouse` command: one module per command, each a few lines over a library call."""
