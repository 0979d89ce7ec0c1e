"""Price tapes: the format, readers and validators, the Polymarket importer and recorder, and
the bundled sample. Imports nothing from ``ledger``, ``strategies`` or ``arena``."""
