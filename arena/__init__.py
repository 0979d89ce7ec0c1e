"""The application: cohorts, the deterministic replay loop, the CLI, the terminal view, reports."""

__version__ = "0.1.0"
