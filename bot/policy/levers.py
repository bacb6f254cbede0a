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


class ReturnGatePolicy(Strict):
    """What `undo` of a node-quarantine checks on dcgm-exporter's series before the node goes back.

    `$node` is the node's name: dcgm-exporter's host label, the node name when it runs as a
    DaemonSet with NODE_NAME (its internal/pkg/hostname GetHostname). That label is `Hostname` in
    every dcgm-exporter release through 4.5.3-4.8.2 and `hostname` on its main branch since
    d5e5f51 (#655, internal/pkg/rendermetrics/render_metrics.go), so each query asks for both
    (`or`: a node's GPUs answer under whichever spelling its exporter writes). `$cell` is the cell
    (a target label your scrape adds), `$window` the time since the quarantine landed (e.g.
    `3600s`). Each query should answer one series per GPU (and per XID, err_code being a label).
    """

    # The seeds' node-fatal classes: 48 and 95 memory that needs a reset, 63 and 64 the row remapper
    # reporting or failing, 74 NVLink, 79 off the bus (13 and 31 are the application's).
    fatal_xids: list[int] = Field(default=[48, 63, 64, 74, 79, 95])
    xid_query: str = (
        'max_over_time(DCGM_FI_DEV_XID_ERRORS{cell="$cell",Hostname="$node"}[$window])'
        ' or max_over_time(DCGM_FI_DEV_XID_ERRORS{cell="$cell",hostname="$node"}[$window])'
    )
    ecc_dbe_query: str = (
        'increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{cell="$cell",Hostname="$node"}[$window])'
        ' or increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{cell="$cell",hostname="$node"}[$window])'
    )
    row_remap_failure_query: str = (
        'max_over_time(DCGM_FI_DEV_ROW_REMAP_FAILURE{cell="$cell",Hostname="$node"}[$window])'
        ' or max_over_time(DCGM_FI_DEV_ROW_REMAP_FAILURE{cell="$cell",hostname="$node"}[$window])'
    )
    timeout_seconds: float = Field(default=5, gt=0)

    @field_validator("xid_query", "ecc_dbe_query", "row_remap_failure_query")
    @classmethod
    def _node(cls, v: str) -> str:
        if "$node" not in v or "$window" not in v:
            raise ValueError("the query must contain $node (the node) and $window (the time since the quarantine)")
        return v

    def render(self, node: str, cell: str, window: str) -> tuple[str, str, str]:
        """The XID, ECC double-bit and row-remap-failure queries sent for ``node`` (escaped)."""
        at = {"node": node, "cell": cell, "window": window}
        return fill(self.xid_query, **at), fill(self.ecc_dbe_query, **at), fill(self.row_remap_failure_query, **at)


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
    """The remediation alarm (bot/signals/remediation): GPU nodes going out of service in a cell, by
    anyone (Firebreak, NodeHealthCheck, kubectl, the cloud), faster than a person would take them out."""

    per_hour: int = Field(default=20, ge=1)  # more than this many in any rolling hour alarms
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
    """route-weight's price: each backend cell's request rate, from vLLM's finished-request counter.
    `$cell` is the backend's cell (route_weight.cell_of); the query must answer one series."""

    rate_query: str = 'sum(rate(vllm:request_success_total{cell="$cell"}[5m]))'

    @field_validator("rate_query")
    @classmethod
    def _cell(cls, v: str) -> str:
        _one_of(v, ("$cell",), "price.route-weight.rate_query")
        return v

    def render(self, cell: str) -> str:
        """The PromQL sent for backend ``cell`` (escaped for its double-quoted string)."""
        return fill(self.rate_query, cell=cell)


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
    """Where each lever's price is read (levers/price.py, levers/gangs.py, levers/pricing.py; DESIGN.md
    section 4); policies/levers.yaml `price:`. Keys are lever names, plus what every price shares.

    A training gang's last checkpoint (jobset-suspend, node-quarantine): `checkpoint_query` first
    (PromQL answering the checkpoint's Unix time for one job; `$namespace` and `$jobset` are the
    JobSet's, escaped), then the JobSet's `checkpoint_annotation` (an RFC 3339 time). Neither
    answers: that gang's progress is unknown.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    timeout_seconds: float = Field(default=5, gt=0)
    # A price that moved by more than this fraction (of any one figure) between approval and
    # execution needs a new approval (levers/executor.py); within it, the approved price stands.
    tolerance: float = Field(default=0.10, ge=0)
    checkpoint_query: str | None = None
    checkpoint_annotation: str | None = "training.corp/last-checkpoint"
    route_weight: RoutePricePolicy = Field(default=RoutePricePolicy(), alias="route-weight")
    keda_pause: KedaPricePolicy = Field(default=KedaPricePolicy(), alias="keda-pause")
    killswitch: KillswitchPricePolicy = KillswitchPricePolicy()
    sandbox_quarantine: SandboxPricePolicy = Field(default=SandboxPricePolicy(), alias="sandbox-quarantine")

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
    # rollout-abort's verify window per Rollout ("<namespace>/<name>" -> seconds); a Rollout not listed
    # waits its own spec.progressDeadlineSeconds, else rollout_verify_seconds.
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
