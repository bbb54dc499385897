"""Test doubles for the test suite (tests/) and the benchmarks (benchmarks/).

Production code never imports this package (tests/test_layers.py checks it):

- :mod:`testing.scripted_llm`: an in-process LLM that replays a script;
- :mod:`testing.scripted_server`: a scripted OpenAI-compatible HTTP server, standard
  library only, run in-process or as ``python -m testing.scripted_server``.
"""
