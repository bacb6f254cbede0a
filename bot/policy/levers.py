"""The `levers` policy section (policies/levers.yaml): who pulls what, where, how far.

Only pydantic here: the levers import this, not the other way round.
"""

from __future__ import annotations

import itertools
import re

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from bot.policy.models import Strict
from bot.policy.roles import ROLES
from bot.prom.promql import fill

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class LeverRule(Strict):
    roles: list[str] = Field(min_length=1)
    needs_approval: bool = False
    why: str | None = None  # shown when needs_approval, e.g. "evicts admitted workloads"

    @field_validator("roles")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        bad = [r for r in v if r not in ROLES]
        if bad:
            raise ValueError(f"unknown role(s) {bad}; roles are {', '.join(ROLES)}")
        return v


class RouteWeightPolicy(Strict):
    steps_percent: list[int] = Field(default=[100, 50, 0], min_length=2)
    min_dwell_minutes: float = Field(default=5, ge=0)
    backend_prefix: str = "cell-"
    backend_cells: dict[str, str] = Field(default_factory=dict)  # explicit backend -> cell

    @field_validator("steps_percent")
    @classmethod
    def _steps(cls, v: list[int]) -> list[int]:
        if v[0] != 100 or any(b >= a for a, b in itertools.pairwise(v)) or v[-1] < 0:
            raise ValueError("steps must start at 100 and go strictly down to a value >= 0, e.g. [100, 50, 0]")
        return v

    def cell_of(self, backend: str) -> str | None:
        if backend in self.backend_cells:
            return self.backend_cells[backend]
        if self.backend_prefix and backend.startswith(self.backend_prefix):
            return backend[len(self.backend_prefix) :] or None
        return None


class HeadroomPolicy(Strict):
    # `$cell` is replaced by the receiving cell's name.
    query: str
    max_burn: float = Field(default=1.0, gt=0)
    timeout_seconds: float = Field(default=5, gt=0)

    @field_validator("query")
    @classmethod
    def _has_cell(cls, v: str) -> str:
        if "$cell" not in v:
            raise ValueError("the headroom query must contain $cell (the receiving cell)")
        return v

    def render(self, cell: str) -> str:
        """The PromQL sent for receiving ``cell`` (escaped for its double-quoted string)."""
        return fill(self.query, cell=cell)


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_GATE_QUERIES = (
    "xid_count_query",
    "xid_count_after_query",
    "xid_held_query",
    "xid_query",
    "ecc_dbe_query",
    "row_remap_pending_query",
    "row_remap_failure_query",
)
_WINDOWED = frozenset({"xid_count_query", "xid_count_after_query", "xid_query", "ecc_dbe_query"})


class ReturnGatePolicy(Strict):
    """What `undo` of a node-quarantine checks on dcgm-exporter's series before the node goes back
    (levers/returngate.py says how each answer is judged).

    `$node` is the node's name: dcgm-exporter's host label, the node name when it runs as a
    DaemonSet with NODE_NAME (its internal/pkg/hostname GetHostname). `$host_label` is that label's
    name: `Hostname` in every dcgm-exporter release through 4.5.3-4.8.2 and `hostname` on its main
    branch since d5e5f51 (#655, internal/pkg/rendermetrics/render_metrics.go), so each query is
    sent for every name of `host_labels` (joined with `or`: a node's GPUs answer under whichever
    spelling its exporter writes; the range-vector `xid_count_query` once per name, as `or` can't
    join range vectors). `$cell` is the cell (a target label your scrape adds), `$window` a
    duration the gate computes from the quarantine's time (e.g. `3600s`). Each query answers one
    series per GPU (and per XID where the code is a label: err_code, xid).
    """

    # Node-fatal XIDs: NVIDIA's XID catalog's immediate action is a GPU reset or a reboot (RESET_GPU,
    # RESTART_BM, WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR); the same list, each code's action and the
    # source, as triage's "GPUs, fatal XID 1h" row (policies/queries.yaml xid_gpus). Not 63 (a row
    # remap recorded: IGNORE), 94 (contained: RESTART_APP), 154 (follows another XID).
    fatal_xids: list[int] = Field(
        default=[46, 48, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158, 160]
    )
    host_labels: list[str] = Field(default=["Hostname", "hostname"], min_length=1)
    # dcgm-exporter's XID count (DCGM_EXP_XID_ERRORS_COUNT): per GPU and code, the XIDs of the last
    # --xid-count-window-size ms. Its raw samples around the quarantine (the gate reads the scrapes),
    # then the most it counted per code after DCGM's 600 s history has passed.
    xid_count_query: str = 'DCGM_EXP_XID_ERRORS_COUNT{cell="$cell",$host_label="$node"}[$window]'
    xid_count_after_query: str = 'max_over_time(DCGM_EXP_XID_ERRORS_COUNT{cell="$cell",$host_label="$node"}[$window])'
    # The XID gauge (the last code, held until the driver reloads), where the count is not exported:
    # each err_code series' latest sample time (asked at the quarantine and now), and the codes it showed.
    xid_held_query: str = 'timestamp(DCGM_FI_DEV_XID_ERRORS{cell="$cell",$host_label="$node"})'
    xid_query: str = 'max_over_time(DCGM_FI_DEV_XID_ERRORS{cell="$cell",$host_label="$node"}[$window])'
    ecc_dbe_query: str = 'increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{cell="$cell",$host_label="$node"}[$window])'
    row_remap_pending_query: str = 'DCGM_FI_DEV_ROW_REMAP_PENDING{cell="$cell",$host_label="$node"}'
    row_remap_failure_query: str = 'DCGM_FI_DEV_ROW_REMAP_FAILURE{cell="$cell",$host_label="$node"}'
    timeout_seconds: float = Field(default=5, gt=0)

    @field_validator("host_labels")
    @classmethod
    def _label_names(cls, v: list[str]) -> list[str]:
        bad = [name for name in v if not _LABEL_NAME.match(name)]
        if bad:
            raise ValueError(f"not Prometheus label names: {bad}; dcgm-exporter writes Hostname or hostname")
        return v

    @field_validator(
        "xid_count_query",
        "xid_count_after_query",
        "xid_held_query",
        "xid_query",
        "ecc_dbe_query",
        "row_remap_pending_query",
        "row_remap_failure_query",
    )
    @classmethod
    def _node(cls, v: str, info: ValidationInfo) -> str:
        if "$node" not in v or "$host_label" not in v:
            raise ValueError('the query must contain $host_label="$node" (the node under the exporter\'s host label)')
        if info.field_name in _WINDOWED and "$window" not in v:
            raise ValueError("the query must contain $window (the gate's duration since the quarantine)")
        return v

    def render(self, query: str, node: str, cell: str, window: str = "") -> str:
        """``query`` (one of this policy's) for ``node`` under every host label, joined by `or` (escaped)."""
        return " or ".join(f"({q})" for q in self.render_each(query, node, cell, window))

    def render_each(self, query: str, node: str, cell: str, window: str = "") -> list[str]:
        """``query`` for ``node``, one per host label (a range vector can't be joined by `or`)."""
        at = {"node": node, "cell": cell, "window": window}
        # A label name is not a string literal, so not escaped: host_labels are checked as names.
        return [fill(query.replace("$host_label", label), **at) for label in self.host_labels]

    def queries(self) -> dict[str, str]:
        """Every query of the gate, by field name."""
        return {name: getattr(self, name) for name in _GATE_QUERIES}


class QuarantinePolicy(Strict):
    per_cell_per_hour: int = Field(default=3, ge=0)
    max_quarantined_fraction: float = Field(default=0.10, ge=0, le=1)
    gpu_node_selector: str = "nvidia.com/gpu.present=true"
    taint_key: str = "gpu.corp/quarantine"
    # NoSchedule/NoExecute taints that only dedicate a node to some pods (the GPU pool's own): such a
    # node still takes work. Every other fence, and a cordon, counts as out for the floor (levers/outofservice.py).
    dedicated_taints: list[str] = Field(
        default=["nvidia.com/gpu", "sku", "kubernetes.azure.com/scalesetpriority", "cloud.google.com/gke-spot"]
    )
    return_gate: ReturnGatePolicy = ReturnGatePolicy()


class RemediationAlarmPolicy(Strict):
    """The remediation alarm (bot/signals/remediation): GPU nodes taken out of service in a cell for
    remediation or as unhealthy (Firebreak's quarantine, NodeHealthCheck's remediators, NVSentinel, and
    the taints listed in `unhealthy_taints`), faster than a person would take them out. Upgrades,
    autoscaler scale-down, Karpenter disruption, pressure taints and not-ready nodes are not counted."""

    per_hour: int = Field(default=20, ge=1)  # more than this many in any rolling hour alarms
    # ... or more than this share of the cell's GPU nodes (at least 2 nodes): a 37% storm of a 40-node
    # cell alarms though it is under per_hour.
    per_hour_fraction: float = Field(default=0.25, gt=0, le=1)
    # Further taint keys (a prefix ends in /) that your own health checker puts on a GPU node it found
    # unhealthy: counted like a remediation.
    unhealthy_taints: list[str] = Field(default_factory=list)
    same_node_minutes: float = Field(default=90, gt=0)  # one node going out twice within this alarms
    quiet_minutes: float = Field(default=60, gt=0)  # a burst is over after this long with no node going out
    poll_seconds: float = Field(default=30, gt=0)  # how often each cell's GPU nodes are read
    sev: int = Field(default=3, ge=1, le=4)  # the SEV of the incident it opens when the cell has none open


class KillswitchPolicy(Strict):
    configmap: str = "toolgw/toolgw-flags"
    key_format: str = "{tenant}.max_side_effect"
    levels: list[str] = Field(default=["none", "read", "write", "money"], min_length=2)  # narrowest first

    @field_validator("key_format")
    @classmethod
    def _tenant(cls, v: str) -> str:
        if "{tenant}" not in v:
            raise ValueError("key_format must contain {tenant}")
        return v


def _one_of(v: str | None, required: tuple[str, ...], where: str) -> str | None:
    if v is not None and (missing := [r for r in required if r not in v]):
        raise ValueError(f"{where} must contain {', '.join(missing)}")
    return v


class RoutePricePolicy(Strict):
    """route-weight's price: each backend cell's request rate, from vLLM's finished-request counter
    (`$cell` is the backend's cell, route_weight.cell_of: the cell's requests on every route), and,
    when set, the stepped route's own rate (`route_rate_query`: `$namespace`, `$route` and `$rule`,
    the rule's index), which is then what the traffic moved is read from. No default: no exporter
    the Gateway API names publishes a route's requests; it is your gateway's series (Envoy Gateway:
    one Envoy cluster per rule, `httproute/<namespace>/<route>/rule/<n>`). Each query must answer one
    series."""

    rate_query: str = 'sum(rate(vllm:request_success_total{cell="$cell"}[5m]))'
    route_rate_query: str | None = None

    @field_validator("rate_query")
    @classmethod
    def _cell(cls, v: str) -> str:
        _one_of(v, ("$cell",), "price.route-weight.rate_query")
        return v

    @field_validator("route_rate_query")
    @classmethod
    def _route(cls, v: str | None) -> str | None:
        return _one_of(v, ("$route",), "price.route-weight.route_rate_query")

    def render(self, cell: str) -> str:
        """The PromQL sent for backend ``cell`` (escaped for its double-quoted string)."""
        return fill(self.rate_query, cell=cell)

    def render_route(self, namespace: str, route: str, rule: int) -> str | None:
        """The PromQL sent for one route's rule, or None when the policy names no route query."""
        if self.route_rate_query is None:
            return None
        return fill(self.route_rate_query, namespace=namespace, route=route, rule=str(rule))


class KedaPricePolicy(Strict):
    """keda-pause's demand trend. None: the ScaledObject's own `prometheus` trigger queries (what KEDA
    scales on). Set: one expression with `$namespace`, `$target` (the scale target's name)."""

    demand_query: str | None = None
    trend_minutes: float = Field(default=15, gt=0)


class KillswitchPricePolicy(Strict):
    """killswitch's price: the tenant's tool calls per minute the new level refuses. No default: no
    exporter publishes a tool gateway's calls; the expression is the operator's (`$tenant`, and
    `$refused`: a regex of the levels wider than the new one, e.g. `write|money`)."""

    calls_query: str | None = None

    @field_validator("calls_query")
    @classmethod
    def _tenant(cls, v: str | None) -> str | None:
        return _one_of(v, ("$tenant",), "price.killswitch.calls_query")


class SandboxPricePolicy(Strict):
    """sandbox-quarantine's price: the sandbox's open sessions. No default (no exporter publishes
    them); the expression is the operator's, with `$namespace` and `$pod`."""

    sessions_query: str | None = None

    @field_validator("sessions_query")
    @classmethod
    def _pod(cls, v: str | None) -> str | None:
        return _one_of(v, ("$pod",), "price.sandbox-quarantine.sessions_query")


class PricePolicy(Strict):
    """Where each lever's price is read (levers/price.py, levers/gangs.py, levers/pricing.py;
    docs/levers.md, "Price"); policies/levers.yaml `price:`. Keys are lever names, plus what every price shares.

    A training gang's last checkpoint (jobset-suspend, node-quarantine): `checkpoint_query` first
    (PromQL answering the checkpoint's Unix time for one job; `$namespace` and `$jobset` are the
    JobSet's, escaped), then the JobSet's `checkpoint_annotation` (an RFC 3339 time). Neither
    answers: that gang's progress is unknown.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    timeout_seconds: float = Field(default=5, gt=0)
    # Between approval and execution (levers/executor.py, levers/price.py Price.moved): a change in
    # what the lever hits needs a new approval; GPU-hours growing with the clock never do; a live
    # figure (req/s, calls/min, %) needs one only when it moved more than this many-fold, up or down
    # (2: doubled or halved; from or to 0 always). Otherwise the figures are read again and announced.
    live_band: float = Field(default=2.0, ge=1)
    checkpoint_query: str | None = None
    checkpoint_annotation: str | None = "training.corp/last-checkpoint"
    route_weight: RoutePricePolicy = Field(default=RoutePricePolicy(), alias="route-weight")
    keda_pause: KedaPricePolicy = Field(default=KedaPricePolicy(), alias="keda-pause")
    killswitch: KillswitchPricePolicy = KillswitchPricePolicy()
    sandbox_quarantine: SandboxPricePolicy = Field(default=SandboxPricePolicy(), alias="sandbox-quarantine")

    @model_validator(mode="before")
    @classmethod
    def _no_tolerance(cls, v: object) -> object:
        # The 10% tolerance made approvals stale by themselves (issue 34): say what replaced it.
        if isinstance(v, dict) and "tolerance" in v:
            raise ValueError(
                "price.tolerance is gone: what the lever hits must not change at all, and GPU-hours never "
                "make an approval stale. Remove it; set price.live_band (how many-fold a live rate may move, "
                "default 2) instead"
            )
        return v

    @field_validator("checkpoint_query")
    @classmethod
    def _per_job(cls, v: str | None) -> str | None:
        if v is not None and "$jobset" not in v:
            raise ValueError("the checkpoint query must contain $jobset (and usually $namespace): one job's figure")
        return v

    def render_checkpoint(self, namespace: str, jobset: str) -> str | None:
        """The PromQL sent for one JobSet (its names escaped for their double-quoted strings)."""
        if self.checkpoint_query is None:
            return None
        return fill(self.checkpoint_query, namespace=namespace, jobset=jobset)


class LeversPolicy(Strict):
    fleet_context: str = "global"
    cells: dict[str, str] = Field(default_factory=dict)  # cell -> kube context (default: same name)
    fleet_targets: list[str] = Field(default_factory=list)  # objects that are fleet-wide wherever they live
    api_timeout_seconds: float = Field(default=10, gt=0)
    rollout_verify_seconds: float = Field(default=20, ge=0)
    # How long rollout-abort's pull waits for Argo, per Rollout ("<namespace>/<name>" -> seconds), else
    # rollout_verify_seconds; at most the Rollout's progress deadline (spec.progressDeadlineSeconds, 600 s
    # unset), when a verdict still open is read again (levers/catalogue/rollout.py, levers/recheck.py).
    rollout_verify_by_rollout: dict[str, float] = Field(default_factory=dict)
    # An object Argo CD or Flux manages is read back again this long after a lever applied, so a
    # revert by the controller's sync or drift correction is seen (levers/gitops.py).
    gitops_resync_seconds: float = Field(default=30, ge=0)
    # After a restart, a request still `executing`/`undoing` this long after it started is taken to be
    # a dead process's, and settled from a read-back (never re-applied). Longer than any one execution.
    stuck_after_seconds: float = Field(default=300, gt=0)
    levers: dict[str, LeverRule] = Field(default_factory=dict)  # overrides of each lever's default_rule
    # Lever -> the namespaces it acts in; deploy/rbac grants a namespaced lever's access only there
    # (`python -m tools.deploygen` writes it from this; killswitch acts in its ConfigMap's namespace).
    namespaces: dict[str, list[str]] = Field(default_factory=dict)
    route_weight: RouteWeightPolicy = RouteWeightPolicy()
    headroom: HeadroomPolicy
    node_quarantine: QuarantinePolicy = QuarantinePolicy()
    killswitch: KillswitchPolicy = KillswitchPolicy()
    remediation_alarm: RemediationAlarmPolicy = RemediationAlarmPolicy()
    price: PricePolicy = PricePolicy()

    @field_validator("levers")
    @classmethod
    def _catalogue(cls, v: dict[str, LeverRule], info: ValidationInfo) -> dict[str, LeverRule]:
        # The catalogue's names come from the composition root (load_policy's ``levers``): the
        # policy sits below the levers and cannot import them, and the catalogue is the one list.
        known = (info.context or {}).get("levers")
        if known is not None and (bad := [n for n in v if n not in known]):
            raise ValueError(f"unknown lever(s) {bad}; levers are {', '.join(known)}")
        return v

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: dict[str, list[str]], info: ValidationInfo) -> dict[str, list[str]]:
        known = (info.context or {}).get("levers")
        if known is not None and (bad := [n for n in v if n not in known]):
            raise ValueError(f"unknown lever(s) {bad}; levers are {', '.join(known)}")
        for lever, names in v.items():
            if bad := [n for n in names if not _NAMESPACE.fullmatch(n)]:
                raise ValueError(f"{lever}: {bad} are not namespace names (lowercase letters, digits and -)")
        return v

    @field_validator("rollout_verify_by_rollout")
    @classmethod
    def _windows(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, s in v.items() if s < 0 or k.count("/") != 1]
        if bad:
            raise ValueError(f"{bad}: keys are <namespace>/<rollout>, values seconds >= 0")
        return v

    @model_validator(mode="after")
    def _fleet_not_a_cell(self) -> LeversPolicy:
        if self.fleet_context in self.cells:
            raise ValueError(f"{self.fleet_context!r} is the fleet context; it cannot also be a cell")
        return self

    def context_of(self, cell: str) -> str:
        return self.cells.get(cell, cell)
