"""Language models as agents and forecasters, through any OpenAI-compatible endpoint.

``prompt`` and ``parse`` are Forecaster Arena's prompt (v1's or v2's wording) and v1's answer
parser, ``schema`` the JSON schemas sent as ``response_format``, ``connection`` the shared way
to reach a model (never part of a cohort's identity), ``client`` the HTTP client that keeps
every attempt, ``calls`` the record of a decision's calls as they happen (kept however the
decision ends), ``cassette`` the recordings a run replays from offline, ``agent`` the ``llm``
strategy and ``forecast`` the ``llm`` forecaster, ``overhead`` the measurement of what the
agent itself costs per call.
"""
