"""Errors the ledger raises for bad input; the CLI prints them as one line."""

from __future__ import annotations


class LedgerError(Exception):
    """Bad input to the ledger: a corrupt or foreign database, a conflicting append, ..."""


class ConcurrencyError(LedgerError):
    """An append expected a stream version that another writer already took."""


class IntegrityError(LedgerError):
    """The log was altered: a broken hash chain or a projection that does not rebuild."""

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq

    def __reduce__(self) -> tuple[type[IntegrityError], tuple[str, int | None]]:
        """Keep ``seq`` across a process boundary (``verify`` checks the chain in another)."""
        return (type(self), (str(self), self.seq))
