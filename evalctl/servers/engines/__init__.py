"""One module per built-in engine, each listed in `servers.registry.ENGINES` by its adapter class.

An engine outside evalctl is a plug-in module anywhere on `sys.path` (docs/guide-add-engine.md).
"""
