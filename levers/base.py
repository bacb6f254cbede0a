"""The Lever interface (the catalogue of levers is levers/catalogue).

A lever is an absolute target state on one object (suspend=true, weight=25),
so replaying it converges. It plans from the object it read (exact calls plus
pre-state), may check budgets or headroom, applies, verifies by reading back,
and undoes by restoring the pre-state (levers.plan.restore_ops).
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.chat import quote
from bot.clusters import Cluster, KubeError
from bot.core.services import Services
from bot.policy.levers import LeverRule, LeversPolicy
from levers.plan import JSON_PATCH, MERGE, ApiCall, Plan, is_absent, kubectl_patch, read, restore_ops
from levers.price import Price

P = TypeVar("P", bound=BaseModel)
# The fields a lever sets (Lever.writes): JSON pointer (or a pattern) -> the value set there, or a predicate on it.
Writes = dict[str | re.Pattern[str], Any]
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class LeverRefusal(Exception):
    """The lever will not run; nothing was sent. The message says why and what to do."""


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str  # the newest version Firebreak speaks
    plural: str
    namespaced: bool
    older: tuple[str, ...] = ()  # older versions it also speaks, newest first (a cluster may serve only those)

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.older)

    def path(self, target: Target, sub: str | None = None, version: str | None = None) -> str:
        v = version or self.version
        base = f"/apis/{self.group}/{v}" if self.group else f"/api/{v}"
        ns = f"/namespaces/{target.namespace}" if self.namespaced else ""
        return f"{base}{ns}/{self.plural}/{target.name}" + (f"/{sub}" if sub else "")

    @property
    def resource(self) -> str:
        """What kubectl calls it (plural.group is unambiguous)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


# kubectl's names for the kinds levers act on and for those people mistake them for: plural, singular
# and short names as each API's discovery lists them (the CRDs' shortNames); the lowercase kind also goes.
_KIND_NAMES: dict[str, tuple[str, ...]] = {
    "Node": ("nodes", "node", "no"),
    "Pod": ("pods", "pod", "po"),
    "ConfigMap": ("configmaps", "configmap", "cm"),
    "Namespace": ("namespaces", "namespace", "ns"),
    "Service": ("services", "service", "svc"),
    "Deployment": ("deployments", "deployment", "deploy"),
    "StatefulSet": ("statefulsets", "statefulset", "sts"),
    "DaemonSet": ("daemonsets", "daemonset", "ds"),
    "ReplicaSet": ("replicasets", "replicaset", "rs"),
    "Job": ("jobs", "job"),
    "JobSet": ("jobsets", "jobset"),
    "ClusterQueue": ("clusterqueues", "clusterqueue", "cq"),
    "LocalQueue": ("localqueues", "localqueue", "lq"),
    "Workload": ("workloads", "workload", "kwl", "kueueworkload", "kueueworkloads"),
    "ScaledObject": ("scaledobjects", "scaledobject", "so"),
    "Rollout": ("rollouts", "rollout", "ro"),
    "HTTPRoute": ("httproutes", "httproute"),
    "NodeHealthCheck": ("nodehealthchecks", "nodehealthcheck", "nhc"),
}


def kind_named(word: str) -> str | None:
    """The Kind a kubectl-style resource word means (`no`, `nodes`, `clusterqueues.kueue.x-k8s.io`), or None."""
    w = word.lower().split(".", 1)[0]  # `plural.group` names the same kind as `plural`
    return next((k for k, names in _KIND_NAMES.items() if w == k.lower() or w in names), None)


@dataclass(frozen=True)
class Access:
    """One RBAC rule a lever (or a reader such as `changed`) needs in a cell: the API group ("" is core),
    the resource as RBAC names it (`nodes`, `rollouts/status`, `deployments/scale`), the verbs, and the
    resourceNames it is limited to (none: every object of that resource).

    Discovery (/api, /apis/<group>/<version>) is not listed: every cluster grants it to all authenticated
    users (system:discovery). deploy/rbac grants exactly the union of these (tests/deploy hold the two equal).
    """

    group: str
    resource: str
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()
    # A cluster-scoped resource no lever acts on (sandbox-quarantine reads Cilium's clusterwide policies):
    # granted in the ClusterRole, since a namespaced Role cannot grant it.
    cluster: bool = False

    @classmethod
    def on(cls, kind: Kind, *verbs: str, sub: str | None = None, names: tuple[str, ...] = ()) -> Access:
        """The rule for `kind` (or its subresource `sub`)."""
        return cls(kind.group, f"{kind.plural}/{sub}" if sub else kind.plural, tuple(verbs), names)


@dataclass(frozen=True)
class Target:
    namespace: str | None
    name: str

    @classmethod
    def parse(cls, text: str, namespaced: bool, kind: str) -> Target:
        """`<namespace>/<name>` or `<name>`, or kubectl-style with the kind: `<namespace>/<kind>/<name>`
        (namespaced), `<kind>/<name>` (cluster-scoped). A kind other than the lever's own is refused."""
        parts = text.strip().split("/")
        word = kind.lower()
        shape = (
            f"`<namespace>/<name>` (or `<namespace>/{word}/<name>`)" if namespaced else f"`<name>` (or `{word}/<name>`)"
        )
        if len(parts) == (3 if namespaced else 2):
            said = parts[-2]
            named = kind if said.lower().split(".", 1)[0] == word else kind_named(said)
            if named is None and namespaced:
                raise LeverRefusal(
                    f"`{quote(said[:60])}` is not a kind Firebreak knows; this lever acts on a {kind}: "
                    f"give the target as {shape}."
                )
            if named is not None and named != kind:
                raise LeverRefusal(
                    f"`{quote(text.strip()[:120])}` is a {named}, but this lever acts on a {kind}: "
                    f"give the {kind} as {shape}."
                )
            if named == kind:
                parts = [*parts[:-2], parts[-1]]
        if namespaced and len(parts) != 2:
            raise LeverRefusal(f"A {kind} lives in a namespace: give the target as {shape}.")
        if not namespaced and len(parts) != 1:
            raise LeverRefusal(f"A {kind} is cluster-scoped: give {shape}, without a namespace.")
        for part in parts:
            if not _NAME.fullmatch(part):
                raise LeverRefusal(
                    f"`{quote(part[:60])}` is not a Kubernetes name (lowercase letters, digits, - and .)."
                )
        return cls(parts[0] if namespaced else None, parts[-1])

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass
class Ctx:
    """Everything one run of a lever needs; rebuilt from the stored record for execution and undo."""

    svc: Services
    kube: Cluster
    req_id: str
    incident: str
    cell: str  # cell name, or "fleet"
    context: str
    target: Target
    params: BaseModel
    requester: str
    version: str | None = None  # the kind's version this cluster serves (levers.base.version_of)
    scratch: dict[str, Any] = field(default_factory=dict)  # facts found while planning (for checks)
    # With an approved budget override, budget breaches are recorded here instead of refused.
    budget_override: bool = False
    breaches: list[str] = field(default_factory=list)

    @property
    def policy(self) -> LeversPolicy:
        return self.svc.policy.levers

    def params_as(self, model: type[P]) -> P:
        """The params as the lever's own model (they were validated with it: levers.base.params_of)."""
        return params_as(self.params, model)


@dataclass
class Verified:
    ok: bool
    text: str


async def awaited(seconds: float, probe: Callable[[], Awaitable[Verified | None]]) -> Verified | None:
    """Ask ``probe`` until it gives a verdict or ``seconds`` have passed: at once, then every half
    second, and once more at the deadline. How a verify waits for a controller's answer to its write
    (Kueue, the JobSet controller, NodeHealthCheck, KEDA). None: no verdict in time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        if (verdict := await probe()) is not None:
            return verdict
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(min(0.5, max(0.0, deadline - loop.time())))


class Lever(ABC):
    name: ClassVar[str]
    kind: ClassVar[Kind]
    summary: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    usage: ClassVar[str] = ""  # the key=value part of the grammar, e.g. "reason=<xid79> [ticket=<INC-7>]"
    fleet_default: ClassVar[bool] = False  # no --cell means the fleet context (the global route table)
    reversible: ClassVar[bool] = True
    not_reversible_why: ClassVar[str] = ""
    # Every API call the lever makes in its cell, whatever the path: plan, dry-run, apply, the conflict
    # re-read, the timeout fence, verify's read-back, budgets and undo (levers.catalogue checks each sets it).
    needs: ClassVar[tuple[Access, ...]]
    # Who pulls it and whether it needs a second person, when policies/levers.yaml does not say.
    default_rule: ClassVar[LeverRule]

    def path(self, ctx: Ctx, sub: str | None = None) -> str:
        return self.kind.path(ctx.target, sub, ctx.version)

    def object_path(self, ctx: Ctx, plan: Plan) -> str:
        """Where the plan's changes live: the target, or the object the lever acts through (plan.path)."""
        return plan.path or self.path(ctx)

    def writes(self, ctx: Ctx, path: str) -> Writes:
        """The fields this lever's plan sets on the object at ``path`` (JSON pointer, or a pattern where the
        object decides, e.g. a route's rule index), each with the value it sets there (or a predicate on
        it), recomputed from the lever's code, target and params. The provenance annotations are every
        lever's and not listed. A stored record naming any other field is refused (levers/bounds.py), so
        a lever that declares none has every stored record refused (levers.catalogue requires one)."""
        return {}

    async def object_of(self, ctx: Ctx, stored: str | None) -> str:
        """The object a stored record may act on, recomputed from the target: the target itself (a record
        naming another path raises LeverRefusal). A lever acting through another object overrides this."""
        path = self.path(ctx)
        if stored is not None and stored != path:
            raise LeverRefusal(f"the object {stored}, not its target {path}")
        return path

    def manual_undo(self, target: str, context: str, pre_state: dict[str, Any]) -> str:
        """For a lever Firebreak can't undo: what a person runs to put back what it changed ('' if nothing fits)."""
        return ""

    def undo_ops(self, changes: dict[str, Any], pre_state: dict[str, Any], current: dict[str, Any]) -> list[Any]:
        """The guarded JSON patch that puts back what this lever changed in `current`."""
        return restore_ops(changes, pre_state, current)

    def not_restored(self, changes: dict[str, Any], pre_state: dict[str, Any], obj: dict[str, Any]) -> list[str]:
        """Pointers the lever changed that `obj` does not (yet) show restored."""
        return [p for p, v in pre_state.items() if p in changes and not p.startswith("/status/") and read(obj, p) != v]

    def accepts(self, policy: LeversPolicy, target: Target, params: BaseModel) -> None:
        """Checks needing no API call (done before anything is read). Raises LeverRefusal."""

    @abstractmethod
    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        """The exact calls for `obj` as read now. Raises LeverRefusal when it makes no sense."""

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """What pulling it costs, read now from the cluster and Prometheus (levers/price.py). A figure
        that cannot be read is a Cost with value None and why; this never raises for one."""
        return Price(notes=("this lever does not state its price yet",))

    async def check(self, ctx: Ctx, plan: Plan, obj: dict[str, Any]) -> None:
        """Policy gates beyond roles (budgets, headroom, dwell). Raises LeverRefusal with the figures."""

    async def reserve(self, ctx: Ctx, plan: Plan) -> None:
        """Atomically take budget just before applying (dry-runs never get here)."""

    async def release(self, ctx: Ctx, plan: Plan) -> None:
        """Give back what `reserve` took when nothing was applied."""

    async def applied(self, ctx: Ctx, plan: Plan) -> None:
        """Bookkeeping after a successful apply (route-weight remembers baseline and step time)."""

    async def undo_check(self, ctx: Ctx, since: float) -> Verified | None:
        """What to check before an undo (node-quarantine's return gate), applied at `since`; not ok:
        the undo needs the IC's approval (levers/undo.py). None: this lever's undo needs no check."""
        return None

    async def undone(self, ctx: Ctx) -> None:
        """Bookkeeping after an undo restored the object (node-quarantine frees its floor place)."""

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        wrong = [p for p, v in plan.changes.items() if read(after, p) != v]
        if wrong:
            got = ", ".join(f"{p}={'absent' if is_absent(read(after, p)) else read(after, p)}" for p in wrong)
            return Verified(False, f"read back differs: {got}")
        return Verified(True, plan.effect)

    def json_patch_call(self, ctx: Ctx, ops: list[dict[str, Any]]) -> ApiCall:
        return ApiCall(
            "PATCH",
            self.path(ctx),
            JSON_PATCH,
            ops,
            kubectl_patch(ctx.context, self.kind.resource, ctx.target.name, ctx.target.namespace, "json", ops),
        )

    def merge_call(self, ctx: Ctx, body: dict[str, Any], sub: str | None = None) -> ApiCall:
        return ApiCall(
            "PATCH",
            self.path(ctx, sub),
            MERGE,
            body,
            kubectl_patch(ctx.context, self.kind.resource, ctx.target.name, ctx.target.namespace, "merge", body, sub),
        )


async def priced(lever: Lever, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
    """The lever's price, read now; an API error while reading it is said in the price (the lever
    still plans: a price is information for the people deciding, not a gate)."""
    try:
        return await lever.price(ctx, obj, plan)
    except KubeError as e:
        return Price(notes=(f"the price could not be read: {e}",))


def rule_of(policy: LeversPolicy, lever: Lever) -> LeverRule:
    """The policy's rule for ``lever`` (policies/levers.yaml `levers:`), else the lever's own default."""
    return policy.levers.get(lever.name) or lever.default_rule


async def version_of(kind: Kind, kube: Cluster) -> str:
    """The newest version of `kind` the cluster serves (asks discovery only when there is a choice)."""
    if not kind.older:
        return kind.version
    served = await kube.served_version(kind.group, kind.versions, kind.plural)
    if served is None:
        raise LeverRefusal(
            f"{kind.kind} ({kind.group}) is not served by this cluster in any version Firebreak speaks "
            f"({', '.join(kind.versions)}): is it installed there?"
        )
    return served


def params_as(params: BaseModel, model: type[P]) -> P:
    if not isinstance(params, model):
        raise TypeError(f"expected {model.__name__} params, got {type(params).__name__}")
    return params


def params_of(lever: Lever, raw: dict[str, Any]) -> BaseModel:
    try:
        return lever.Params.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "not a parameter of this lever"
        elif err["type"] == "missing":
            msg = "required"
        usage = f" Usage: `/incident lever {lever.name} <target> [--cell C]{' ' + lever.usage if lever.usage else ''}`"
        raise LeverRefusal(f"`{quote(where)}`: {msg}.{usage}") from None
