"""The `queries` policy section (policies/queries.yaml): what `triage` asks Prometheus per cell, and
what `changed` reads (the demand query, the node labels, how much counts as a shift).

Only pydantic here: bot/triage imports this, not the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from string import Template

from pydantic import Field, field_validator, model_validator

from bot.policy.models import Strict
from bot.prom.promql import fill

# What a triage query may name: `$cell` (the cell, always) and, from levers.yaml's node_quarantine,
# `$taint_key` (its taint), `$dedicated_taints` (its dedicated_taints' keys as a regex) and
# `$gpu_node_label` / `$gpu_node_value` (its gpu_node_selector as a kube-state-metrics label), so
# the quarantine row counts the nodes the quarantine budget counts, as it does.
PLACEHOLDERS = ("cell", "taint_key", "dedicated_taints", "gpu_node_label", "gpu_node_value")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# kube-state-metrics writes a node label `k` as `label_<k>`, each character outside [a-zA-Z0-9_] an
# underscore (internal/store/utils.go, SanitizeLabelName).
_KSM_INVALID = re.compile(r"[^a-zA-Z0-9_]")
# levers.yaml's defaults (bot/policy/levers.py QuarantinePolicy), for callers that give none.
DEFAULT_DEDICATED = ("nvidia.com/gpu", "sku", "kubernetes.azure.com/scalesetpriority", "cloud.google.com/gke-spot")
DEFAULT_GPU_NODES = "nvidia.com/gpu.present=true"


def ksm_label(selector: str) -> tuple[str, str]:
    """A `key=value` node selector as kube-state-metrics' kube_node_labels label and value:
    `nvidia.com/gpu.present=true` -> (`label_nvidia_com_gpu_present`, `true`)."""
    key, eq, value = selector.partition("==") if "==" in selector else selector.partition("=")
    key, value = key.strip(), value.strip()
    if not eq or not key or any(c in selector for c in ",!()"):
        raise ValueError(
            f"gpu_node_selector {selector!r} is not one `key=value`, which triage's quarantine row "
            "reads as a kube-state-metrics label; write it as `key=value` in levers.yaml"
        )
    return f"label_{_KSM_INVALID.sub('_', key)}", value


def keys_regex(keys: Sequence[str]) -> str:
    """Taint keys as one RE2 alternation Prometheus anchors (`a|b`); none: a regex no key matches
    (keys are never empty), so `key!~` keeps every key."""
    return "|".join(re.escape(k) for k in keys) if keys else "$^"


class Unit(Enum):
    """How a figure is shown: seconds `1.24 s`, burn `14.4x`, percent (of a 0..1 fraction) `97%`,
    per_second `0.52/s`, count `3`, ratio `2.35`."""

    seconds = "seconds"
    burn = "burn"
    percent = "percent"
    per_second = "per_second"
    count = "count"
    ratio = "ratio"


def _placeholders(query: str, allowed: tuple[str, ...]) -> str:
    t = Template(query)
    if not t.is_valid():
        raise ValueError("a `$` that is not a placeholder; write `$$` for a literal dollar sign")
    bad = [p for p in t.get_identifiers() if p not in allowed]
    if bad:
        names = ", ".join(f"${p}" for p in allowed) or "none"
        raise ValueError(f"unknown placeholder(s) {', '.join('$' + b for b in bad)}; placeholders: {names}")
    return query


class TriageQuery(Strict):
    name: str  # a short id (snake_case), for logs and the audit
    title: str = Field(min_length=1, max_length=24)  # the table's row label
    unit: Unit
    query: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError("name must be snake_case: lowercase letters, digits and _, at most 32")
        return v

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        _placeholders(v, PLACEHOLDERS)
        if "$cell" not in v and "${cell}" not in v:
            raise ValueError("the query must contain $cell: it runs once per cell of the incident")
        return v

    def render(
        self,
        cell: str,
        taint_key: str,
        dedicated_taints: Sequence[str] = DEFAULT_DEDICATED,
        gpu_node_selector: str = DEFAULT_GPU_NODES,
    ) -> str:
        """The PromQL sent for ``cell`` (triage asks it; the demo's Prometheus knows it by this text).
        Values are escaped for the double-quoted strings they sit in (`{cell="$cell"}`). ValueError
        when the query names `$gpu_node_label` and the selector is not one `key=value`."""
        values = {"cell": cell, "taint_key": taint_key, "dedicated_taints": keys_regex(dedicated_taints)}
        if "$gpu_node_" in self.query or "${gpu_node_" in self.query:
            values["gpu_node_label"], values["gpu_node_value"] = ksm_label(gpu_node_selector)
        return fill(self.query, **values)


class DemandPolicy(Strict):
    """`changed`'s demand stream: each cell's request rate now and H hours before."""

    # One series per cell, labelled `cell`, for every cell at once (a drained cell is usually not
    # one of the incident's cells). No placeholders.
    query: str = Field(min_length=1)
    # Rose: the rate now is at least this fraction above the rate H hours ago (0.2 = +20%).
    rise_at_least: float = Field(default=0.2, gt=0)
    # Drained: the rate now is at least this fraction below it (0.5 = halved or less).
    drop_at_least: float = Field(default=0.5, gt=0, le=1)
    # Below this many requests per second a cell counts as idle: it can't drain, and a rise from
    # idle is new traffic.
    idle_below: float = Field(default=0.05, ge=0)

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        return _placeholders(v, ())


class ChangedPolicy(Strict):
    # The NVIDIA GPU Operator's (GPU Feature Discovery's) node label with the full driver version.
    driver_label: str = "nvidia.com/cuda.driver-version.full"
    # Node labels that name the node image (the first one a node has is shown).
    node_image_labels: list[str] = Field(default_factory=lambda: ["node.corp/image-version"])
    # Each stream of one cell gives up after this long and says so.
    timeout_seconds: float = Field(default=20, gt=0)
    # At most this many items per stream (the rest are counted, not listed).
    max_items: int = Field(default=5, ge=1, le=20)
    demand: DemandPolicy


class QueriesPolicy(Strict):
    # Each query gives up after this long and shows `failed`.
    timeout_seconds: float = Field(default=5, gt=0, le=60)
    queries: list[TriageQuery] = Field(min_length=1, max_length=30)
    changed: ChangedPolicy

    @model_validator(mode="after")
    def _unique(self) -> QueriesPolicy:
        seen: set[str] = set()
        for q in self.queries:
            if q.name in seen:
                raise ValueError(f"query name {q.name!r} is used twice")
            seen.add(q.name)
        return self
