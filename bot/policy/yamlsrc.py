"""YAML loading that remembers where every value came from.

pydantic reports an error location as a path of keys; this maps that path
back to a line in the file so a bad policy is refused with file:line: reason.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import SafeConstructor

Loc = tuple[str | int, ...]

# libyaml's parser when PyYAML was built with it (the wheels are): the same nodes and marks, about
# ten times faster than the pure-Python one, which every start and policy re-read would pay for.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_with_lines(text: str) -> tuple[Any, dict[Loc, int]]:
    node = yaml.compose(text, Loader=_LOADER)
    lines: dict[Loc, int] = {}
    if node is None:
        return {}, lines
    scalars = SafeConstructor()  # one for the file: it needs no stream, only the node

    def walk(n: yaml.Node, path: Loc) -> Any:
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for k, v in n.value:
                key = k.value
                lines[(*path, key)] = k.start_mark.line + 1
                out[key] = walk(v, (*path, key))
            return out
        if isinstance(n, yaml.SequenceNode):
            return [walk(v, (*path, i)) for i, v in enumerate(n.value)]
        # Scalars: let the safe constructor apply YAML's own typing rules.
        return scalars.construct_object(n, deep=True)

    return walk(node, ()), lines


def line_for(lines: dict[Loc, int], loc: Loc) -> int | None:
    for cut in range(len(loc), -1, -1):
        hit = lines.get(tuple(loc[:cut]))
        if hit is not None:
            return hit
    return None
