"""One module per built-in engine, each listed in `servers.registry.ENGINES`; plug-ins: docs/guide-add-engine.md."""
