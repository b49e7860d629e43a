"""YAML loading that keeps line numbers, for `FILE:LINE: what is wrong` errors.

The document is composed into PyYAML's node tree and converted by hand:
mappings become `LocMap` (a dict that knows its own line and each key's line),
sequences `LocSeq`. Floats are not resolved: `0.10` and `2.0` are protocol
versions, and a float would turn "0.10" into 0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from harness.errors import UsageError, one_line


class ScenarioError(UsageError):
    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path, self.line, self.message = str(path), line, message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class _Loader(yaml.SafeLoader):
    pass


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
    return loader.construct_object(node)


def decode_utf8(path: Path, raw: bytes) -> str:
    """The file's text; ScenarioError at the line of the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ScenarioError(path, line, f"not UTF-8 (byte 0x{raw[e.start]:02x} at column "
                                        f"{column}); save the file as UTF-8") from None


def load(path: Path) -> Any:
    """Parse one YAML document; syntax errors become ScenarioError with the line."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ScenarioError(path, None, f"cannot read: {e.strerror or e}") from None
    text = decode_utf8(path, raw)
    try:
        loader = _Loader(text)
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
