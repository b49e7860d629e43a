"""One call per node at once: what every backend uses where a change must reach
all nodes together (a partition's rules, a host's setup), so the cluster never
spends long in a half-applied state the scenario did not ask for."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def parallel(items: Iterable[T], fn: Callable[[T], Any]) -> list[Any]:
    """fn over items, one thread each; the first error (in items' order) is raised
    once every call has ended, so nothing is left half-done behind it."""
    items = list(items)
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [pool.submit(fn, x) for x in items]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]
    return [f.result() for f in futures]
