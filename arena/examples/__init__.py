"""Small example inputs bundled with arena, so every command can be tried without data.

They are package data (read them with ``importlib.resources.files("arena.examples")``), not
code; ``README.md`` here says how each one was made from the real Polymarket recordings.
"""
