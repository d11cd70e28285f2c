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


def noise_cell(config: SweepConfig, launch: ServerLaunch) -> CellKey | None:
    """The cell the A/A arm repeats on this launch's server, if any: per profile, the first variant's
    reference cell (cache off when the sweep has it: what cache-on cells are compared with), first shot count."""
    if not config.noise or launch.variant.name != config.active_variants()[0].name:
        return None
    reference = CacheMode.off if CacheMode.off in config.cache else CacheMode.on
    return CellKey(launch.profile.name, launch.variant.name, reference, config.shots[0], 1) if launch.cache is reference else None


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
