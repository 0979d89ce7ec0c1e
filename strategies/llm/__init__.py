"""Language models as agents and forecasters, through any OpenAI-compatible endpoint.

``prompt`` and ``parse`` are Forecaster Arena v1's prompt and answer parser, ``schema`` the JSON
schemas sent as ``response_format``, ``connection`` the shared way to reach a model (never part
of a cohort's identity), ``client`` the HTTP client that keeps every attempt, ``cassette`` the
recordings a run replays from offline, ``agent`` the ``llm`` strategy and ``forecast`` the
``llm`` forecaster, ``overhead`` the measurement of what the agent itself costs per call.
"""
