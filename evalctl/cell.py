"""`CellKey`: the one name of a cell, a (profile, variant, cache, shots, concurrency, pass) of a sweep, in the plan,
the records, resuming, sequential stopping, the manifest and the gate's checks. Values read back from a table (numpy
integers, "on"/"off" strings) are cast in `from_row`, so every other place compares like with like.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from evalctl.schema import CacheMode


@dataclass(frozen=True, order=True)
class CellKey:
    profile: str
    variant: str
    cache: CacheMode
    shots: int
    concurrency: int  # requests in flight (a level of the sweep's `concurrency` axis)
    pass_index: int  # 1-based; pass 2 re-runs the cell without a flush

    @classmethod
    def columns(cls, *without: str) -> list[str]:
        """The fields (the records' columns naming a cell) in order, less `without`: e.g. the keys that pair cache on with off."""
        names = [f.name for f in fields(cls)]
        unknown = set(without) - set(names)
        if unknown:  # a misspelt key would silently group by the whole cell
            raise ValueError(f"not a cell key: {', '.join(sorted(unknown))}")
        return [n for n in names if n not in without]

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | Any) -> CellKey:
        """The cell a mapping or a DataFrame row (a Series) names."""
        return cls(*(cast(row[name]) for cast, name in zip((str, str, CacheMode, int, int, int), cls.columns())))

    @classmethod
    def from_record(cls, record: Any) -> CellKey:
        """The cell of anything holding the six as attributes (a `SampleRecord`, a manifest's `CellDecision`)."""
        return cls.from_row({name: getattr(record, name) for name in cls.columns()})

    @classmethod
    def groups(cls, frame: Any) -> Iterator[tuple[CellKey, Any]]:
        """A DataFrame's rows by cell, in cell order."""
        names = cls.columns()
        for values, group in frame.groupby(names, sort=True):
            yield cls.from_row(dict(zip(names, values))), group

    @classmethod
    def in_frame(cls, frame: Any) -> list[CellKey]:
        """The cells a DataFrame holds rows of, in row order."""
        return [cls.from_row(row) for row in frame[cls.columns()].drop_duplicates().to_dict("records")]

    def as_dict(self) -> dict[str, Any]:
        """The six as the records' columns (and gate.json, the manifest) hold them: cache as "on"/"off"."""
        return {**{name: getattr(self, name) for name in self.columns()}, "cache": self.cache.value}

    @property
    def label(self) -> str:
        return cell_label(**self.as_dict())


def cell_label(
    profile: str | None = None,
    variant: str | None = None,
    cache: str | None = None,
    shots: int | None = None,
    concurrency: int | None = None,
    pass_index: int | None = None,
) -> str:
    """A cell for people, 'cpu/default cache=on shots=16 conc=4 pass=1', of the parts given (a gate finding may name only some)."""
    parts = ["/".join(x for x in (profile, variant) if x)] if profile else []
    named = (("cache", cache), ("shots", shots), ("conc", concurrency), ("pass", pass_index))
    parts += [f"{k}={v}" for k, v in named if v is not None]
    return " ".join(parts)
