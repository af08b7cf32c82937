"""The corpus services: each runs as ``python -m tests.corpus.services.NAME --port P``."""
