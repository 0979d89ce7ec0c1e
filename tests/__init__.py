"""The test suite, a package laid out like the code (``tests/ledger/`` tests ``ledger/``, ...).

A package so that ``tests/ledger`` and the rest are ``tests.ledger`` and never shadow the real
top-level packages; shared helpers are imported as ``tests.llama_server`` and so on.
"""
