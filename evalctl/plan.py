"""Expand a config into ordered work: server launches, each with its cells.

Order minimises restarts: one server per (profile, variant, cache mode), every
shot count and pass run against it before it is stopped.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalctl.cell import CellKey
from evalctl.schema import CacheMode, ServerProfile, SweepConfig, Variant


@dataclass(frozen=True)
class ServerLaunch:
    profile: ServerProfile
    variant: Variant
    cache: CacheMode
    cells: tuple[CellKey, ...]

    @property
    def label(self) -> str:
        return f"{self.profile.name}/{self.variant.name} cache={self.cache.value}"


def noise_cells(config: SweepConfig, launch: ServerLaunch) -> tuple[CellKey, ...]:
    """The cells the A/A arm repeats on this launch's server: its reference cells (cache off when the sweep
    has it: what cache-on cells are compared with), every shot count, first pass; none without `noise`.

    Every variant and shot count gets its own: each cache-on cell's warm-vs-cold disagreement is judged
    against the cold-vs-cold floor of its own build on its own prompts (`analysis.floor`); a floor
    borrowed from another build or prefill length would not hold for it."""
    reference = CacheMode.off if CacheMode.off in config.cache else CacheMode.on
    if not config.noise or launch.cache is not reference:
        return ()
    return tuple(cell for cell in launch.cells if cell.pass_index == 1)


def expand(config: SweepConfig) -> list[ServerLaunch]:
    launches = []
    for profile in config.servers:
        for variant in config.active_variants():
            for cache in config.cache:
                cells = tuple(
                    CellKey(profile.name, variant.name, cache, shots, pass_index)
                    for shots in config.shots
                    for pass_index in range(1, config.passes + 1)
                )
                launches.append(ServerLaunch(profile, variant, cache, cells))
    return launches
