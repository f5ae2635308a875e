"""Serving LLMs: requests of tokens, the GPUs that serve them, what they cost (docs/serving.md)."""
