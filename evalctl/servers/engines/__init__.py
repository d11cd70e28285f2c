"""One module per engine, each registering its adapter with `@register_engine` (see servers.registry).

Every module in this package is imported when the registry is first asked, so an engine is
added by adding its module here, with no edit anywhere else (docs/guide-add-engine.md).
"""
