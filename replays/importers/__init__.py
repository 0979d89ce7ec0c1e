"""Importers that turn Polymarket's own data shapes into tapes."""

from replays.importers.election2024 import import_election2024, import_election2024_result
from replays.importers.polymarket import ImportResult, import_polymarket, import_polymarket_result

__all__ = [
    "ImportResult",
    "import_election2024",
    "import_election2024_result",
    "import_polymarket",
    "import_polymarket_result",
]
