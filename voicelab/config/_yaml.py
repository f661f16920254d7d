"""Parsing YAML with bounds: a config file has a size limit and its aliases a budget.

Plain scalars are typed by the YAML 1.2 core schema, not PyYAML's YAML 1.1 rules: under 1.1
``requested_reminder: 17:00`` is the sexagesimal integer 1020, ``country: no`` the boolean
false, ``mode: 0755`` the octal 493 and ``day: 2026-12-02`` a date; in a configuration those
are a clock time, a word, a number and a date the user wrote, so they stay what they look like.
Only ``true``/``false`` (three casings) are booleans, ``null``/``~``/empty is null, decimal,
``0o`` and ``0x`` integers and decimal floats are numbers; everything else is a string. The
merge key ``<<`` is kept (YAML 1.2 dropped it, but anchored configs use it).

A "billion laughs" document (``a: &a [x, x]``, ``b: &b [*a, *a]``, ...) is a few hundred bytes
that PyYAML composes into a few shared nodes; every consumer that walks it as a tree
(``${VAR}`` interpolation, validation, JSON for ``evaluator.init`` and the resolved documents)
then copies each alias again, exponentially. So the composed node graph is measured as the
tree it stands for, each alias counted at the full size of what it names, before anything is
constructed from it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from .._atomic import file_kind
from ..errors import ConfigError

#: Largest configuration file (run, scenario, persona, data, script, environment, suite) read.
MAX_CONFIG_FILE_BYTES = 1024 * 1024
#: Most values (mapping keys, mapping values, list items, the documents themselves) one YAML
#: document may stand for once every alias is expanded; far more than a hand-written 1 MiB file
#: holds, so only alias amplification reaches it.
MAX_EXPANDED_VALUES = 1_000_000
#: Most characters of scalar text one YAML document may stand for once every alias is expanded.
MAX_EXPANDED_TEXT_CHARS = 16 * 1024 * 1024


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def read_config_text(path: Path, *, key: str | None = None,
                     referrer: str | Path | None = None) -> str:
    """The text of one config file, refused past :data:`MAX_CONFIG_FILE_BYTES` before reading it.

    The declared size is checked first; at most one byte more than the limit is ever read, so a
    device or pipe that never ends is refused too.
    """
    blame = referrer or path
    not_a_file = not_a_regular_file(path)
    if not_a_file:
        raise ConfigError(f"expected a file, found {not_a_file}: {path}", source=blame, key=key)
    try:
        with path.open("rb") as handle:
            declared = os.fstat(handle.fileno()).st_size
            if declared > MAX_CONFIG_FILE_BYTES:
                raise _too_large(path, declared)
            content = handle.read(MAX_CONFIG_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}", source=blame, key=key) from None
    except IsADirectoryError:
        raise ConfigError(f"expected a file, found a directory: {path}", source=blame,
                          key=key) from None
    except (OSError, ValueError) as error:  # ValueError: NUL in the path
        raise ConfigError(f"cannot read {path}: {error}", source=blame, key=key) from None
    if len(content) > MAX_CONFIG_FILE_BYTES:
        raise _too_large(path, None)
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"cannot read {path}: {error}", source=blame, key=key) from None


def not_a_regular_file(path: Path) -> str | None:
    """What ``path`` is when it exists but is no regular file ("a directory", "a named pipe
    (FIFO)", "a device", "a socket"); None for a regular file or a missing path (opening a pipe
    or a device would block or never end, so they are refused before any read)."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None  # missing or unreadable: the open reports it precisely
    if stat.S_ISREG(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else file_kind(mode)


def _too_large(path: Path, size: int | None) -> ConfigError:
    found = f"{_megabytes(size)}; " if size is not None else ""
    return ConfigError(f"file too large ({found}configuration files are limited to "
                       f"{_megabytes(MAX_CONFIG_FILE_BYTES)})", source=path)


class ExpansionError(yaml.YAMLError):
    """A document whose aliases stand for too much (or for themselves)."""

    def __init__(self, problem: str, key_path: str):
        super().__init__(problem)
        self.problem = problem
        self.key_path = key_path


_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_MERGE = re.compile(r"^(?:<<)$")


class CoreSchemaResolver(Resolver):
    """Implicit tags of the YAML 1.2 core schema (plus the merge key): nothing else is typed."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}


for _tag, _pattern, _first in (
        ("tag:yaml.org,2002:bool", _CORE_BOOL, "tTfF"),
        ("tag:yaml.org,2002:null", _CORE_NULL, ["~", "n", "N", ""]),
        ("tag:yaml.org,2002:int", _CORE_INT, "-+0123456789"),
        ("tag:yaml.org,2002:float", _CORE_FLOAT, "-+0123456789."),
        ("tag:yaml.org,2002:merge", _MERGE, "<")):
    CoreSchemaResolver.add_implicit_resolver(_tag, _pattern, list(_first))


class CoreSchemaConstructor(SafeConstructor):
    """Core-schema numbers: ``0755`` is decimal 755, ``0o755`` octal, no ``_`` or ``1:30``."""

    def construct_yaml_int(self, node: ScalarNode) -> int:
        value = self.construct_scalar(node)
        if not isinstance(value, str) or not _CORE_INT.match(value):
            raise ConstructorError(None, None, f"not an integer: {value!r}", node.start_mark)
        if value.startswith("0o"):
            return int(value[2:], 8)
        if value.startswith("0x"):
            return int(value[2:], 16)
        return int(value, 10)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value = self.construct_scalar(node)
        if not isinstance(value, str) or not _CORE_FLOAT.match(value):
            raise ConstructorError(None, None, f"not a number: {value!r}", node.start_mark)
        special = value.lower().lstrip("+")
        if special in (".inf", "-.inf", ".nan"):
            return float(special.replace(".", ""))
        return float(value)


CoreSchemaConstructor.add_constructor("tag:yaml.org,2002:int",
                                      CoreSchemaConstructor.construct_yaml_int)
CoreSchemaConstructor.add_constructor("tag:yaml.org,2002:float",
                                      CoreSchemaConstructor.construct_yaml_float)


class BoundedSafeLoader(Reader, Scanner, Parser, Composer, CoreSchemaConstructor,
                        CoreSchemaResolver):
    """A safe loader with YAML 1.2 core-schema scalars that refuses a document beyond the
    expansion budget before building it."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        CoreSchemaConstructor.__init__(self)
        CoreSchemaResolver.__init__(self)

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None:
            check_expansion(node)
        return node


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with core-schema scalars, within the expansion budget (raises
    :class:`ExpansionError` past it)."""
    return yaml.load(text, Loader=BoundedSafeLoader)  # noqa: S506 - a SafeLoader subclass


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_expansion(root: Node) -> None:
    """Raise :class:`ExpansionError` if ``root``, expanded as a tree, exceeds the budget.

    Each distinct node is measured once (post-order, memoized by identity), so the check costs
    the size of the document as written, not as expanded. A node met again while it is still
    being measured is an alias inside its own anchor: a tree of infinite size.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, text characters)
    open_nodes: set[int] = set()            # the ancestors of the node being measured
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, measured_children = stack.pop()
        ident = id(node)
        if measured_children:
            open_nodes.discard(ident)
            values, text = 1, 0
            for child in _children(node):
                child_values, child_text = sizes[id(child)]
                values += child_values
                text += child_text
            if values > MAX_EXPANDED_VALUES:
                raise ExpansionError(
                    f"aliases expand this to more than {MAX_EXPANDED_VALUES:,} values "
                    f"(the limit for one file)", _key_path(root, node))
            if text > MAX_EXPANDED_TEXT_CHARS:
                raise ExpansionError(
                    f"aliases expand this to more than {MAX_EXPANDED_TEXT_CHARS:,} characters "
                    f"of text (the limit for one file)", _key_path(root, node))
            sizes[ident] = (values, text)
            continue
        if ident in sizes:
            continue
        if ident in open_nodes:
            raise ExpansionError("an alias refers to a value that contains it (a recursive "
                                 "alias stands for an infinite document)", _key_path(root, node))
        if isinstance(node, ScalarNode):
            sizes[ident] = (1, len(node.value))
            continue
        open_nodes.add(ident)
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(_children(node)))


def _key_path(root: Node, target: Node) -> str:
    """The key path (``a.b[2]``) of the first place ``target`` appears, in document order."""
    seen: set[int] = set()
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            stack.extend((item, f"{path}[{index}]")
                         for index, item in reversed(list(enumerate(node.value))))
        elif isinstance(node, MappingNode):
            for key, value in reversed(node.value):
                name = key.value if isinstance(key, ScalarNode) else "?"
                stack.append((value, f"{path}.{name}" if path else str(name)))
                stack.append((key, path))
    return ""
