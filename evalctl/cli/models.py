"""`evalctl models list`: the model aliases and gate policies evalctl knows, and where each came from."""

from __future__ import annotations

import typer

from evalctl.cli.common import console
from evalctl.config_files import CONFIG_PATH_ENV, PACKAGED, POLICY_FOLDER, Found, known

app = typer.Typer(help="The model aliases and gate policies that --model and gate_policy name.", no_args_is_help=True)


def _source(found: Found) -> str:
    return found.source + (f" (over {', '.join(found.shadows)})" if found.shadows else "")


def _serves(name: str) -> tuple[str, str]:
    """The alias's task and engines, as the sweep would resolve them; the error instead for a broken one."""
    from evalctl.config import load_config
    from evalctl.errors import ConfigError

    try:
        config = load_config(model=name)
    except ConfigError as exc:
        lines = str(exc).splitlines()  # the first names the file, shown under "from"; the rest say what is wrong
        return "-", "invalid: " + "; ".join(line.strip() for line in lines[1:] or lines)
    return config.task, ", ".join(sorted({profile.engine.name if profile.engine else "detected" for profile in config.servers}))


@app.command("list")
def list_models() -> None:
    """List each model alias (its task, engines and the folder it came from) and each gate policy.

    Searched in order: the folders of EVALCTL_CONFIG_PATH (separated by the system's path separator),
    then the ones shipped with evalctl ("packaged"); the first file of a name wins.
    """
    import pandas as pd

    from evalctl.report.terminal import frame_table

    aliases = [[name, *_serves(name), _source(found)] for name, found in known().items()]
    console.print(frame_table(pd.DataFrame(aliases, columns=["alias", "task", "engines", "from"]), "Model aliases (--model NAME)"))
    policies = pd.DataFrame([[name, _source(found)] for name, found in known(POLICY_FOLDER).items()], columns=["policy", "from"])
    console.print(frame_table(policies, f"Gate policies (gate_policy: NAME, in {POLICY_FOLDER}/)"))
    console.print(f"search order: ${CONFIG_PATH_ENV} folders, then {PACKAGED}", highlight=False)
