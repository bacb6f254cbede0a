"""PromQL text built from values: every cell name, label value or taint key put into a query goes
through ``escape``, so a value with a quote or a backslash stays inside its string literal (it
can neither break the query nor add to it)."""

from __future__ import annotations

from string import Template


def escape(value: str) -> str:
    """``value`` safe inside a PromQL double-quoted string (`{cell="<here>"}`): backslash, double
    quote and line breaks escaped as PromQL's lexer reads them."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def fill(query: str, **values: str) -> str:
    """``query`` (a policy's PromQL with ``$name`` placeholders) with each placeholder replaced by
    its value through ``escape``; a placeholder given no value stays as written."""
    return Template(query).safe_substitute({k: escape(v) for k, v in values.items()})
