"""YAML loading that keeps line numbers, for `FILE:LINE: what is wrong` errors.

The document is composed into PyYAML's node tree and converted by hand:
mappings become `LocMap` (a dict that knows its own line and each key's line),
sequences `LocSeq`. Floats are not resolved: `0.10` and `2.0` are protocol
versions, and a float would turn "0.10" into 0.1.

Every YAML file isrlab reads (scenarios, nightly files, hosts files) comes
through load(), which bounds what a file can cost before it is converted: at
most MAX_BYTES, UTF-8 (contract.utf8), at most MAX_VALUES values and MAX_DEPTH
levels of nesting, an alias counting as every value it stands for. An alias
bomb (`b: &b [*a, *a, ...]` nested nine deep: 9**9 values from 300 bytes) is
refused at the alias that crosses the bound, while it is composed, before
anything is expanded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from contract import utf8
from harness.errors import UsageError, one_line

# The biggest shipped file (a catalogue scenario) is under 4 KB and 300 values;
# these leave two orders of magnitude, and a file at a bound is refused within
# a second and ~30 MB (PyYAML's pure-Python parser: ~30,000 values a second).
MAX_BYTES = 256 * 1024
MAX_VALUES = 20_000
MAX_DEPTH = 64


class ScenarioError(UsageError):
    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path, self.line, self.message = str(path), line, message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class _Loader(yaml.SafeLoader):
    """SafeLoader that counts while it composes: every value, each alias as the
    values its anchor stands for (MAX_VALUES), and the nesting an alias adds
    where it is used (MAX_DEPTH). Aliases themselves are allowed (a list of
    nodes named once and used twice is fine); their expansion is bounded."""

    def __init__(self, text: str, path: Path) -> None:
        super().__init__(text)
        self._path = path
        self._values = 0  # of the document so far, aliases expanded
        self._depth = 0  # of the node being composed
        # id(node) -> (values, height) of every node composed, for the aliases
        # to it; a node being composed has none yet.
        self._size: dict[int, tuple[int, int]] = {}

    def _refuse(self, mark: Any, message: str) -> ScenarioError:
        return ScenarioError(self._path, mark.line + 1, message)

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None:  # else PyYAML's "found undefined alias"
                if id(target) not in self._size:
                    raise self._refuse(event.start_mark, f"alias *{event.anchor} is used "
                                       "inside the value it names")
                values, height = self._size[id(target)]
                self._values += values
                if self._values > MAX_VALUES:
                    raise self._refuse(event.start_mark, f"alias *{event.anchor} ({values} "
                                       f"values) takes the file past {MAX_VALUES} values, "
                                       "aliases expanded")
                if self._depth + height > MAX_DEPTH:
                    raise self._refuse(event.start_mark, f"alias *{event.anchor} nests values "
                                       f"more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        mark = self.peek_event().start_mark
        self._values += 1
        if self._values > MAX_VALUES:
            raise self._refuse(mark, f"more than {MAX_VALUES} values in one file")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise self._refuse(mark, f"values nested more than {MAX_DEPTH} levels deep")
        before = self._values
        node = super().compose_node(parent, index)
        self._depth -= 1
        children = ([n for kv in node.value for n in kv] if isinstance(node, MappingNode)
                    else node.value if isinstance(node, SequenceNode) else [])
        height = 1 + max((self._size[id(c)][1] for c in children), default=0)
        self._size[id(node)] = (1 + self._values - before, height)
        return node


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class LocMap(dict):
    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LocSeq(list):
    line: int = 0
    item_lines: list[int]

    def line_of(self, i: int) -> int:
        return self.item_lines[i] if i < len(self.item_lines) else self.line


def _line(node: Node) -> int:
    return node.start_mark.line + 1


def _convert(node: Node, path: Path, loader: _Loader) -> Any:
    if isinstance(node, MappingNode):
        m = LocMap()
        m.line, m.key_lines = _line(node), {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise ScenarioError(path, _line(key_node), "mapping keys must be plain scalars")
            key = key_node.value
            if key in m:
                raise ScenarioError(path, _line(key_node), f"duplicate key {key!r}")
            m[key] = _convert(value_node, path, loader)
            m.key_lines[key] = _line(key_node)
        return m
    if isinstance(node, SequenceNode):
        s = LocSeq(_convert(item, path, loader) for item in node.value)
        s.line, s.item_lines = _line(node), [_line(item) for item in node.value]
        return s
    try:
        return loader.construct_object(node)
    except yaml.YAMLError:
        raise
    except Exception:  # noqa: BLE001 - an explicit tag its value does not fit: `!!int x`
        raise ScenarioError(path, _line(node), f"{node.value!r} is no {node.tag}") from None


def load(path: Path) -> Any:
    """Parse one YAML document within the bounds above; syntax errors, bytes that are
    not UTF-8 and a file past a bound become ScenarioError with the line."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)  # no more: the file may be endless (/dev/zero)
    except OSError as e:
        raise ScenarioError(path, None, f"cannot read: {e.strerror or e}") from None
    if len(raw) > MAX_BYTES:
        raise ScenarioError(path, None, f"more than {MAX_BYTES // 1024} KiB; an isrlab YAML "
                                        "file is at most that")
    try:
        text = utf8.decode(raw)
    except utf8.NotUTF8 as e:
        raise ScenarioError(path, e.line, f"{e}; save the file as UTF-8") from None
    try:
        loader = _Loader(text, path)
        try:
            node = loader.get_single_node()
            if node is None:
                raise ScenarioError(path, 1, "the file is empty")
            return _convert(node, path, loader)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (e.context, e.problem) if p)
        raise ScenarioError(path, line, f"YAML syntax error: {problem}") from None
    except yaml.reader.ReaderError as e:
        # A character YAML does not allow (a NUL, most control characters).
        line = text.count("\n", 0, e.position) + 1
        what = f"U+{e.character:04X}" if isinstance(e.character, int) else repr(e.character)
        raise ScenarioError(path, line, f"character {what} is not allowed in YAML") from None
    except yaml.YAMLError as e:
        raise ScenarioError(path, None, f"YAML error: {one_line(e)}") from None
