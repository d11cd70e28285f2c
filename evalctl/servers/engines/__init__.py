"""One module per engine, each registering its adapter with `@register_engine` (see engine_registry).

Every module in this package is imported when the registry is first asked, so an engine is
added by adding its module here, with no edit anywhere else (docs/guide-add-engine.md). The
package's path also takes `DIR/evalctl/servers/engines/` for every DIR on sys.path
(PYTHONPATH), so an engine can live outside an installed evalctl.
"""

import os
import sys

__path__ += [  # noqa: F821 - a package's own __path__
    found
    for entry in sys.path
    if os.path.isdir(found := os.path.join(entry or ".", "evalctl", "servers", "engines")) and found not in __path__  # noqa: F821
]
