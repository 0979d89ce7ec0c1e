"""Errors the ledger raises for bad input; the CLI prints them as one line."""


class LedgerError(Exception):
    """Bad input to the ledger: a corrupt or foreign database, a conflicting append, ..."""


class ConcurrencyError(LedgerError):
    """An append expected a stream version that another writer already took."""


class IntegrityError(LedgerError):
    """The log was altered: a broken hash chain or a projection that does not rebuild."""

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq
