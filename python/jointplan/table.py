"""Result tables (sweep rows, diff rows, a memory report) as plain columns, convertible
to a pandas or polars DataFrame; neither library is a dependency: each is imported only
when its conversion is asked for."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List


class Table:
    """Named columns of equal length, in column order."""

    def __init__(self, columns: Dict[str, List[Any]]):
        lengths = {len(values) for values in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self.columns: Dict[str, List[Any]] = columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), []))

    def __getitem__(self, name: str) -> List[Any]:
        """A column by name."""
        return self.columns[name]

    def __repr__(self) -> str:
        return f"Table({len(self)} rows: {', '.join(self.columns)})"

    def rows(self) -> Iterator[Dict[str, Any]]:
        """The rows, each a dict by column."""
        names = list(self.columns)
        for values in zip(*self.columns.values()):
            yield dict(zip(names, values))

    def to_dict(self) -> Dict[str, List[Any]]:
        """The columns (a copy)."""
        return {name: list(values) for name, values in self.columns.items()}

    def to_pandas(self):
        """A ``pandas.DataFrame`` of the columns (needs pandas installed)."""
        try:
            import pandas
        except ImportError as error:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from error
        frame = pandas.DataFrame(self.to_dict(), columns=list(self.columns))
        # A column of integers with gaps stays integers (pandas' nullable ``Int64``), not
        # float64, which would round counts and byte figures above 2**53.
        for name, values in self.columns.items():
            present = [v for v in values if v is not None]
            if (present and len(present) < len(values)
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in present)
                    and all(-2**63 <= v < 2**63 for v in present)):
                frame[name] = pandas.array(values, dtype="Int64")
        return frame

    def to_polars(self):
        """A ``polars.DataFrame`` of the columns (needs polars installed)."""
        try:
            import polars
        except ImportError as error:
            raise ImportError("to_polars() needs polars: pip install polars") from error
        return polars.DataFrame(self.to_dict(), strict=False)
