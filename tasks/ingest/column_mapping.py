"""Which of an operator's columns is which: ``--columns`` and ``--columns-file``.

An operator's systems name their columns their own way (an asset register's ``Asset Name``,
``Site``; a meter export's ``Date/Time``). A column mapping reads the file's column SOURCE as
the warehouse's column TARGET, so the file is ingested as it was exported:

* ``--columns "Asset Name=building_id,Site=site_id"``: comma-separated ``SOURCE=TARGET`` pairs
  (a source name holding a comma needs the mapping file); ``SOURCE=`` with no target leaves
  that column out of the ingest (an asset register's floor area, a meter export's notes);
* ``--columns-file FILE``: the same pairs in a file, a CSV with the header ``source,target``
  (a blank target leaves the column out) or a JSON object ``{"Asset Name": "building_id"}``
  (``null`` or ``""`` leaves it out). Both options together are one mapping.

A source column the file does not have, a target that the file kind has no column of, two
sources mapped to one target and a source mapped twice are refused, naming both names. The
columns the mapping does not name keep their names (and are checked as before: an unexpected
one is refused, so a mapping never drops a column silently).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.ingest.errors import MalformedSourceError

__all__ = ["ColumnMapping", "parse_pairs"]


def parse_pairs(items: Iterable[str]) -> tuple[str, ...]:
    """``["Asset Name=building_id", "Notes="]`` checked to be ``SOURCE=TARGET`` pairs (the
    option's own validation: ``ValueError`` for one that is not)."""
    checked = []
    for item in items:
        source, equals, target = item.rpartition("=")
        if not equals or not source.strip():
            raise ValueError(f"{item!r} is not SOURCE=TARGET (e.g. 'Asset Name=building_id'; "
                             "'Notes=' leaves a column out)")
        checked.append(f"{source.strip()}={target.strip()}")
    return tuple(checked)


@dataclass(frozen=True)
class _Pair:
    source: str
    target: str | None
    origin: str
    """Where the pair was given: ``--columns`` or ``--columns-file FILE``."""


@dataclass(frozen=True)
class ColumnMapping:
    """Source column -> target column (``None``: leave the column out), from the options."""

    pairs: tuple[_Pair, ...] = ()

    @classmethod
    def from_options(cls, columns: Sequence[str] | None, columns_file: str | None
                     ) -> ColumnMapping:
        """The mapping ``--columns`` (checked ``SOURCE=TARGET`` pairs) and ``--columns-file``
        give, the file read now (an unreadable or malformed one is refused, naming it)."""
        pairs = [_Pair(s, t or None, "--columns")
                 for s, _, t in (item.rpartition("=") for item in columns or ())]
        if columns_file is not None:
            pairs += _read_mapping_file(Path(columns_file))
        mapping = cls(tuple(pairs))
        mapping._check_consistent()
        return mapping

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def _check_consistent(self) -> None:
        seen: dict[str, _Pair] = {}
        targets: dict[str, _Pair] = {}
        for pair in self.pairs:
            if pair.source in seen:
                first = seen[pair.source]
                raise MalformedSourceError(
                    f"{pair.origin} maps column {pair.source!r} a second time (to "
                    f"{pair.target!r}; {first.origin} maps it to {first.target!r}); map each "
                    "column once")
            seen[pair.source] = pair
            if pair.target is None:
                continue
            if pair.target in targets:
                first = targets[pair.target]
                raise MalformedSourceError(
                    f"{pair.origin} maps both {first.source!r} and {pair.source!r} to "
                    f"{pair.target!r}; one column of the file is read as each target")
            targets[pair.target] = pair

    @property
    def targets(self) -> set[str]:
        return {p.target for p in self.pairs if p.target is not None}

    def rename(self, path: Path, names: Sequence[str]) -> list[str | None]:
        """The file's column ``names`` as the mapping reads them (``None``: left out). A
        source the file lacks, or a target the file already has as an unmapped column, is
        refused naming both."""
        by_source = {p.source: p for p in self.pairs}
        for pair in self.pairs:
            if pair.source not in names:
                raise MalformedSourceError(
                    f"{path}: {pair.origin} maps column {pair.source!r} to "
                    f"{pair.target or 'nothing (left out)'!r}, but the file has no column "
                    f"{pair.source!r}; its columns are {list(names)}")
        renamed = [by_source[n].target if n in by_source else n for n in names]
        for name in names:
            pair = next((p for p in self.pairs if p.target == name), None)
            if pair is not None and name not in by_source:
                raise MalformedSourceError(
                    f"{path}: {pair.origin} maps column {pair.source!r} to {name!r}, but the "
                    f"file already has a column {name!r}; map that one elsewhere or leave it "
                    f"out ('{name}=')")
        return renamed

    def check_targets(self, path: Path, allowed: Collection[str], what: str) -> None:
        """Every target is one of ``allowed`` (the columns of ``what``, e.g. 'a buildings
        file'), else an error naming the source and the target."""
        for pair in self.pairs:
            if pair.target is not None and pair.target not in allowed:
                raise MalformedSourceError(
                    f"{path}: {pair.origin} maps column {pair.source!r} to {pair.target!r}, "
                    f"which is not a column of {what}; the columns are "
                    f"{', '.join(allowed)}")


def _read_mapping_file(path: Path) -> list[_Pair]:
    origin = f"--columns-file {path}"
    if not path.is_file():
        raise MalformedSourceError(f"{origin}: no such file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise MalformedSourceError(f"{origin}: cannot be read ({error})") from None
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise MalformedSourceError(f"{origin}: not valid JSON ({error})") from None
        if not isinstance(raw, dict) or not all(
                isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in raw.items()):
            raise MalformedSourceError(
                f"{origin}: a JSON mapping is one object of column names, "
                '{"Asset Name": "building_id", "Notes": null}')
        return [_Pair(k.strip(), (v or "").strip() or None, origin) for k, v in raw.items()]
    if suffix != ".csv":
        raise MalformedSourceError(f"{origin}: a mapping file is a .csv (source,target) or a "
                                   ".json object")
    rows = list(csv.reader(text.splitlines()))
    if not rows or [c.strip().lower() for c in rows[0]] != ["source", "target"]:
        raise MalformedSourceError(f"{origin}: line 1 must be the header source,target")
    pairs = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != 2 or not row[0].strip():
            raise MalformedSourceError(
                f"{origin}: line {number}: a source column and a target (blank: left out), "
                f"found {row}")
        pairs.append(_Pair(row[0].strip(), row[1].strip() or None, f"{origin} (line {number})"))
    return pairs
