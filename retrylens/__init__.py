"""RetryLens: explicit, recorded and learnable retry decisions for LLM agents."""

__version__ = "0.1.0"
