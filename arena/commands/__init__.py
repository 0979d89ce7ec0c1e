"""One module per CLI command; ``arena.cli`` imports them only when the command runs."""
