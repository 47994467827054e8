"""Seconds by computation index: a prediction's durations and expected latencies.

A dict of floats by index holds its table and a float object each; these hold native doubles in
one table (`startup.cheap.float64s`) and one byte each for which indices it holds, a fraction
of the dict's memory (see bench/results/issue17-passes.md#memory-of-a-100k-clean-build). A
build holds two of them from its prediction to its end.
"""

from __future__ import annotations

from farmer.startup.cheap import float64s

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


class Seconds:
    """A float for each index of `keys` (indices below `size`, each once), read as a dict
    of them is (get, [], in, len, iteration in the order of `keys`, items, values, keys);
    set by index, for those of `keys` only. `keys` is kept, not copied."""

    __slots__ = ("values_by_index", "has", "_keys")

    def __init__(self, size: int, keys: list[int]) -> None:
        self.values_by_index = float64s(size)
        self.has = bytearray(size)  # 1: set (an index of `keys` not set yet reads as absent)
        self._keys = keys

    def get(self, i: int, default: float | None = None) -> float | None:
        return self.values_by_index[i] if 0 <= i < len(self.has) and self.has[i] else default

    def __getitem__(self, i: int) -> float:
        if not (0 <= i < len(self.has) and self.has[i]):
            raise KeyError(i)
        return self.values_by_index[i]

    def __setitem__(self, i: int, value: float) -> None:
        self.values_by_index[i] = value
        self.has[i] = 1

    def __contains__(self, i: object) -> bool:
        return isinstance(i, int) and 0 <= i < len(self.has) and self.has[i] == 1

    def __len__(self) -> int:
        return self.has.count(1)

    def __iter__(self) -> Iterator[int]:
        has = self.has
        return (i for i in self._keys if has[i])

    def keys(self) -> Iterator[int]:
        return iter(self)

    def values(self) -> Iterator[float]:
        values = self.values_by_index
        return (values[i] for i in self)

    def items(self) -> Iterator[tuple[int, float]]:
        values = self.values_by_index
        return ((i, values[i]) for i in self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Seconds):
            other = dict(other.items())
        return isinstance(other, dict) and dict(self.items()) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Seconds({dict(self.items())!r})"
