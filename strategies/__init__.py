"""The strategy plugin API, the loader and the built-in agents. Imports only from ``ledger``."""
