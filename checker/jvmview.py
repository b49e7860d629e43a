"""Py4J class and method lookups, made once per driver JVM instead of per call.

PySpark resolves every ``F.col``, ``F.lit``, ``PythonUtils.toSeq`` ... by name
on each call: one Py4J round trip to find the class in the JVM view, one to
find the static method, then the call itself. A small check builds its plans
with ~9,700 Py4J calls, ~3,000 of them these lookups (bench/README.md, time to
verdict). A class's static methods do not change while its JVM runs, so the
view below remembers the classes it found and each remembers its methods.
Static fields are not remembered (their values can change), nor packages.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JVMView


class _Class(JavaClass):
    """A JavaClass that keeps the static methods it has looked up."""

    def __getattr__(self, name: str) -> Any:
        found = super().__getattr__(name)
        if isinstance(found, JavaMember):
            self.__dict__[name] = found  # found as a plain attribute from now on
        return found


class CachingJVMView(JVMView):
    """A JVMView that keeps the classes it has looked up (as _Class)."""

    def __getattr__(self, name: str) -> Any:
        found = super().__getattr__(name)
        if isinstance(found, JavaClass):
            found = _Class(found._fqn, found._gateway_client)
            self.__dict__[name] = found
        return found


def caching(view: JVMView) -> CachingJVMView:
    """The same JVM view (its id, hence its imports), with lookups kept."""
    if isinstance(view, CachingJVMView):
        return view
    return CachingJVMView(view._gateway_client, view._jvm_name, id=view._id)
