"""The tests' local HTTP servers share arena's loopback plumbing (``arena.bench.loopback``):
a real server on 127.0.0.1, an ephemeral port, started and stopped by the test."""

from typing import ClassVar

from arena.bench import loopback


class LocalServer(loopback.LocalServer):
    """Stops within 5 ms: most LLM-client, agent, forecaster and recorder tests start and stop
    a server of their own, and the benchmarks' 50 ms (fewer wake-ups beside what they measure)
    added up to seconds of waiting over the suite."""

    poll_interval: ClassVar[float] = 0.005
