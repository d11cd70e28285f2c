"""Inference servers: one module per engine (`servers.engines`, found by `servers.registry`), one lifecycle shared by all."""
