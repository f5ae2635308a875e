"""Serving LLMs: requests of tokens, the GPUs that serve them and what they cost (docs/serving.md)."""
