"""LLM providers behind one protocol (see :mod:`engine.llm.base`)."""
