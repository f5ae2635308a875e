"""What is computed from one immutable input alone, kept while that input lives.

A profile's cuts and tables, or a network's layout, are the same every time a solver compiles
them: :class:`KeptFor` keeps each by the identity of the object it was made from (never by
value: hashing a large network or layer graph would cost more than a small solve) and lets it
go when that object is collected. The value must not refer to its object (it would then never
be collected).

Examples
--------
>>> class Model:
...     pass
>>> kept: KeptFor[Model, int] = KeptFor()
>>> p = Model()
>>> kept.get(p, "total", lambda: 3), kept.get(p, "total", lambda: 4)  # made once
(3, 3)
>>> len(kept)
1
>>> del p
>>> len(kept)  # gone with its object
0
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["KeptFor", "forget_all"]

K = TypeVar("K")
V = TypeVar("V")


class KeptFor(Generic[K, V]):
    """Values made from an object and a hashable ``what``, kept by the object's identity
    until it is collected (see the module docstring)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[weakref.ref[K], dict[Hashable, V]]] = {}
        _ALL.add(self)

    def get(self, owner: K, what: Hashable, make: Callable[[], V]) -> V:
        """The value ``what`` of ``owner``: kept, or ``make()`` now and kept."""
        key = id(owner)
        entry = self._items.get(key)
        if entry is None or entry[0]() is not owner:
            entry = (weakref.ref(owner, self._forget(key)), {})
            self._items[key] = entry
        values = entry[1]
        if what not in values:
            values[what] = make()
        return values[what]

    def _forget(self, key: int) -> Callable[[weakref.ref[K]], None]:
        items = self._items

        def forget(ref: weakref.ref[K]) -> None:
            if key in items and items[key][0] is ref:  # not a later object of the same id
                del items[key]

        return forget

    def clear(self) -> None:
        """Forget every value (what a cold start sees)."""
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


_ALL: weakref.WeakSet[KeptFor[Any, Any]] = weakref.WeakSet()


def forget_all() -> None:
    """Forget every kept value of every :class:`KeptFor`: the next compile of any network or
    profile starts cold, as the first one in a process does (what a benchmark of that case
    calls between runs)."""
    for kept in list(_ALL):
        kept.clear()
