"""Inference servers: one module per engine (`servers.engines`, found by `engine_registry`), one lifecycle shared by all."""
