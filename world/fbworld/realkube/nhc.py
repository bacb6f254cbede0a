"""Medik8s NodeHealthCheck against a real kube-apiserver: a stand-in, because the Go module proxy
answers 403 for github.com/medik8s/node-healthcheck-operator at every version, so the real operator
cannot be built here.

It follows NodeHealthCheck v0.9.0 (the version of the CRD in fbworld/kube/crds), read in
medik8s/node-healthcheck-operator at tag v0.9.0 (commit 4d2139702b8a), behaviour by behaviour; each
method names the upstream file and function it mirrors. Paths below are relative to that tag:
  controllers/nodehealthcheck_controller.go   (the reconciler)
  controllers/resources/{manager,templates,status}.go
  controllers/utils/utils.go, controllers/utils/annotations/annotations.go
  vendor/github.com/medik8s/common/pkg/{annotations,conditions,labels,nodes}

It runs as the other stand-ins do (fbworld.realkube.controllers: RealKube and run_controllers), one
pass = one Reconcile of every NodeHealthCheck. Upstream reconciles on NodeHealthCheck generation
changes, Node condition changes and remediation object updates; polling every pass sees the same
states, only sooner.

Not modelled (no test here can observe them, or they need what a bare API server lacks): node
Leases (resources/lease.go; the remediators' coordination), Events, Prometheus metrics, the
MachineHealthCheck conflict and cluster-upgrade checks (OpenShift only: both answer "no" on a plain
cluster), the etcd quorum check for control plane nodes (OpenShift only), and the admission webhook
(api/v1alpha1/nodehealthcheck_webhook.go). `spec.maxUnhealthy` is not in v0.9.0: it came to the main
branch after the last release, and the v0.9.0 CRD prunes it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fbworld.kube.controllers import set_condition
from fbworld.realkube.controllers import Conflict, RealKube, Reconciler

Obj = dict[str, Any]
NHC_API = "/apis/remediation.medik8s.io/v1alpha1"
NHC_API_VERSION = "remediation.medik8s.io/v1alpha1"
MANAGER = "manager"  # the operator's binary (Dockerfile: /manager); controller-runtime's field manager

# api/v1alpha1/nodehealthcheck_types.go
DISABLED = "Disabled"
REASON_DISABLED_TEMPLATE_NOT_FOUND = "RemediationTemplateNotFound"
REASON_DISABLED_TEMPLATE_INVALID = "RemediationTemplateInvalid"
REASON_ENABLED = "NodeHealthCheckEnabled"
ENABLED_MESSAGE = "No issues found, NodeHealthCheck is enabled."  # nodehealthcheck_controller.go enabledMessage
# vendor/github.com/medik8s/common/pkg/annotations, controllers/utils/annotations
NODE_NAME_ANNOTATION = "remediation.medik8s.io/node-name"
TEMPLATE_NAME_ANNOTATION = "remediation.medik8s.io/template-name"
MULTIPLE_TEMPLATES_ANNOTATION = "remediation.medik8s.io/multiple-templates-support"
TIMED_OUT_ANNOTATION = "remediation.medik8s.io/nhc-timed-out"
OLD_CR_ANNOTATION = "nodehealthcheck.medik8s.io/old-remediation-cr-flag"
OLD_CR_AFTER = timedelta(hours=48)  # remediationCRAlertTimeout
# vendor/github.com/medik8s/common/pkg/labels, nodehealthcheck_controller.go
EXCLUDE_LABEL = "remediation.medik8s.io/exclude-from-remediation"
CONTROL_PLANE_ROLES = ("node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane")
CONTROL_PLANE_CR_LABEL = "remediation.medik8s.io/isControlPlaneNode"
PART_OF = {"app.kubernetes.io/part-of": "node-healthcheck-controller"}
# vendor/github.com/medik8s/common/pkg/conditions
SUCCEEDED = "Succeeded"
PERMANENT_NODE_DELETION_EXPECTED = "PermanentNodeDeletionExpected"
TEMPLATE_SUFFIX = "Template"


class ReconcileError(Exception):
    """What upstream's Reconcile returns as an error (logged; the request is retried with backoff)."""


class _TemplateError(ReconcileError):
    def __init__(self, message: str, *, not_found: bool = False, broken: bool = False) -> None:
        super().__init__(message)
        self.not_found, self.broken = not_found, broken


def go_time(t: datetime) -> str:
    """metav1.Time as JSON: RFC 3339 in UTC, whole seconds."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime:
    """A metav1.Time; absent or unparsable is Go's zero time (so every duration has passed since)."""
    if isinstance(value, str) and value:
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return datetime(1, 1, 1, tzinfo=UTC)


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


def parse_duration(value: Any) -> timedelta:
    """metav1.Duration (Go's time.ParseDuration; the CRD's pattern admits only these forms)."""
    text = str(value or "")
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ReconcileError(f"time: invalid duration {text!r}")
    return timedelta(seconds=sum(float(n) * _DURATION_UNITS[u] for n, u in parts))


def scaled_value(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true), as Reconcile calls it for minHealthy."""
    if value is None:
        raise ReconcileError("nil value for IntOrString")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        raise ReconcileError(f"invalid value for IntOrString: invalid type: string is not a percentage: {text}")
    try:
        percent = int(text[:-1])
    except ValueError as e:
        raise ReconcileError(f"invalid value for IntOrString: invalid value {text!r}") from e
    return math.ceil(percent * total / 100)


def label_selector(selector: Obj | None) -> str:
    """metav1.LabelSelectorAsSelector, as the string a List's labelSelector takes."""
    sel = selector or {}
    terms = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
        if op == "In":
            terms.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            terms.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            terms.append(key)
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
        else:
            raise ReconcileError(
                f"failed converting a selector from NHC selector: {op!r} is not a valid pod selector operator"
            )
    return ",".join(terms)


def node_name_of(cr: Obj) -> str:
    """utils.GetNodeNameFromCR: the node-name annotation, else the object's name."""
    ann = cr["metadata"].get("annotations") or {}
    return str(ann.get(NODE_NAME_ANNOTATION, cr["metadata"]["name"]))


def template_name_of(cr: Obj) -> str:
    """utils.GetTemplateNameFromCR."""
    return str((cr["metadata"].get("annotations") or {}).get(TEMPLATE_NAME_ANNOTATION, ""))


def is_owner(cr: Obj, nhc: Obj) -> bool:
    """resources.IsOwner: an ownerReference with the NodeHealthCheck's kind, apiVersion and name."""
    return any(
        r.get("kind") == "NodeHealthCheck" and r.get("apiVersion") == NHC_API_VERSION and r.get("name") == nhc_name(nhc)
        for r in cr["metadata"].get("ownerReferences") or []
    )


def nhc_name(nhc: Obj) -> str:
    return str(nhc["metadata"]["name"])


def cr_condition(cr: Obj, ctype: str) -> str | None:
    """getCondition: the status of a remediation object's condition (None when it has none)."""
    for c in (cr.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == ctype:
            return str(c.get("status"))
    return None


def merge_diff(before: Any, after: Any) -> Any:
    """The JSON merge patch (RFC 7386) from `before` to `after`, as client.MergeFrom(orig).Data(new)
    computes it: objects recursively, removed keys as null, anything else replaced whole."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return after
    out: Obj = {}
    for k in before.keys() - after.keys():
        out[k] = None
    for k, v in after.items():
        if k not in before:
            out[k] = v
        elif before[k] != v:
            out[k] = merge_diff(before[k], v)
    return out


async def merge_patch(kube: RealKube, path: str, body: Obj, manager: str) -> Obj:
    """PATCH with a JSON merge patch (RealKube has GET/POST/PUT/DELETE only); errors as RealKube's."""
    session = kube._session
    assert session is not None, "use RealKube as an async context manager"
    headers = {"Content-Type": "application/merge-patch+json"}
    params = {"fieldManager": manager}
    async with session.patch(
        kube.url + path, data=json.dumps(body), headers=headers, params=params, ssl=kube._ssl
    ) as r:
        data = await r.json(content_type=None)
        if r.status in (404, 409, 429):
            raise Conflict(f"PATCH {path}: {r.status} {data.get('message')}")
        if r.status >= 400:
            raise RuntimeError(f"PATCH {path}: {r.status} {data.get('message')}")
        return dict(data)


@dataclass
class _Kind:
    """A remediation (or template) kind as the server serves it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def base(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection(self, namespace: str | None = None) -> str:
        ns = f"/namespaces/{namespace}" if namespace and self.namespaced else ""
        return f"{self.base()}{ns}/{self.plural}"

    def item(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection(namespace)}/{name}"


class NodeHealthChecks(Reconciler):
    """NodeHealthCheckReconciler.Reconcile for every NodeHealthCheck, once per pass.

    ``clock`` is upstream's ``currentTime`` (a package variable its tests replace); ``errors`` holds the
    last error each NodeHealthCheck's reconcile returned (upstream logs it and retries with backoff)."""

    name = "node-healthcheck"

    def __init__(self, kube: RealKube, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(kube)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.errors: dict[str, str] = {}
        self._kinds: dict[tuple[str, str], _Kind | None] = {}

    async def reconcile(self) -> None:
        for nhc in await self.kube.list(f"{NHC_API}/nodehealthchecks"):
            try:
                await self.reconcile_one(nhc)
                self.errors.pop(nhc_name(nhc), None)
            except Conflict:
                continue  # requeued: the next pass
            except ReconcileError as e:
                self.errors[nhc_name(nhc)] = str(e)

    # ------------------------------------------------------------------ nodehealthcheck_controller.go

    async def reconcile_one(self, nhc: Obj) -> None:
        """Reconcile: the status is patched at the end whatever happened (its deferred patchStatus)."""
        orig = copy.deepcopy(nhc)
        status = nhc.setdefault("status", {})
        try:
            await self._reconcile(nhc, status)
        finally:
            await self.patch_status(nhc, orig)

    async def _reconcile(self, nhc: Obj, status: Obj) -> None:
        spec = nhc.get("spec") or {}
        # "set counters to zero for disabled NHC" (v0.9.0 nodehealthcheck_controller.go L179-181): every
        # Reconcile starts here, and the early returns below (disabled, paused) keep the zeros.
        status["observedNodes"] = 0
        status["healthyNodes"] = 0
        status.pop("inFlightRemediations", None)  # "clear deprecated field before it's removed from the API"
        conds: list[Obj] = status.setdefault("conditions", [])

        # ("check if we need to disable NHC because of existing MHCs": MHCChecker.NeedDisableNHC answers
        # false without OpenShift's Machine API.)
        valid, reason, message = await self.validate_templates(nhc)
        if not valid:
            if not any(
                c.get("type") == DISABLED and c.get("status") == "True" and c.get("reason") == reason for c in conds
            ):
                set_condition(conds, DISABLED, "True", reason, message, None)
            return
        if not any(c.get("type") == DISABLED and c.get("status") == "False" for c in conds):
            set_condition(conds, DISABLED, "False", REASON_ENABLED, ENABLED_MESSAGE, None)

        selected = await self.get_nodes(spec.get("selector"))
        not_matching, soon_matching, matching = self.check_node_conditions(selected, nhc)

        # (isClusterUpgrading: OpenShift's ClusterVersion only; false here.)
        if spec.get("pauseRequests"):
            # "Postponing potential remediations because of pause requests" (L260-266): it returns before
            # deleteOrphanedRemediationCRs (L271), the healthy nodes' HandleHealthyNode (the CR deletion)
            # and the counts (L320-321), so remediation objects of nodes that healed are not deleted
            # (their remediator keeps them fenced), no new one is created, the node counts stay at the
            # zeros set above and status.unhealthyNodes stays as it was.
            return

        await self.delete_orphaned_remediation_crs(nhc, [*not_matching, *soon_matching, *matching])

        # "Delete remediation CRs for healthy nodes"; "only consider nodes without remediation CRs as healthy".
        healthy = 0
        for node in not_matching:
            name = node["metadata"]["name"]
            crs = await self.handle_healthy_node(name, name, nhc)
            if not crs:
                update_status_node_healthy(name, status)
                healthy += 1
                continue
            update_status_node_conditions_healthy(name, status, self.clock())

        status["observedNodes"] = len(selected)
        status["healthyNodes"] = healthy
        if not matching:
            return

        # "check if we have enough healthy nodes"
        min_healthy = scaled_value(spec.get("minHealthy"), len(selected))
        skip = healthy < min_healthy  # "Skipped remediation because the number of healthy nodes ..."

        for node in matching:
            update_status_node_unhealthy(node["metadata"]["name"], status)
            if skip:
                continue
            if EXCLUDE_LABEL in (node["metadata"].get("labels") or {}):
                continue  # "Remediation skipped on node %s: node has Exclude from Remediation label"
            await self.remediate(node, nhc)
            for cr in await self.list_remediation_crs(nhc, owned_for_node(nhc, node["metadata"]["name"])):
                await self.alert_old_remediation_cr(cr)

    def check_node_conditions(self, nodes: list[Obj], nhc: Obj) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """checkNodeConditions: nodes not matching, soon matching (a condition whose duration has not
        run out yet) and matching an unhealthy condition. (MHCChecker.NeedIgnoreNode: false here.)"""
        not_matching, soon, matching = [], [], []
        for node in nodes:
            hit, soon_after = self.matches_unhealthy_conditions(nhc, node)
            if hit:
                matching.append(node)
            elif soon_after is not None and soon_after > timedelta(0):
                soon.append(node)
            else:
                not_matching.append(node)
        return not_matching, soon, matching

    def matches_unhealthy_conditions(self, nhc: Obj, node: Obj) -> tuple[bool, timedelta | None]:
        """matchesUnhealthyConditions: any unhealthy condition (type and status) held for its duration
        since the node condition's lastTransitionTime (conditions are ORed)."""
        by_type = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
        expires: timedelta | None = None
        now = self.clock()
        for uc in (nhc.get("spec") or {}).get("unhealthyConditions") or []:
            n = by_type.get(uc.get("type"))
            if n is None or n.get("status") != uc.get("status"):
                continue
            since = parse_time(n.get("lastTransitionTime"))
            duration = parse_duration(uc.get("duration"))
            if now > since + duration:
                return True, None
            left = since + duration - now + timedelta(seconds=1)
            expires = left if expires is None else min(expires, left)
        return False, expires

    async def delete_orphaned_remediation_crs(self, nhc: Obj, all_nodes: list[Obj]) -> None:
        """deleteOrphanedRemediationCRs: remediation objects this NHC owns whose node is not among the
        selected nodes any more (deleted, or no longer selected), unless a PermanentNodeDeletionExpected
        remediation has not Succeeded yet."""
        names = {n["metadata"]["name"] for n in all_nodes}

        def orphaned(cr: Obj) -> bool:
            if cr["metadata"].get("deletionTimestamp") or not is_owner(cr, nhc):
                return False
            if cr_condition(cr, PERMANENT_NODE_DELETION_EXPECTED) == "True" and cr_condition(cr, SUCCEEDED) != "True":
                return False
            return node_name_of(cr) not in names

        for cr in await self.list_remediation_crs(nhc, orphaned):
            update_status_node_healthy(node_name_of(cr), nhc["status"])
            await self.delete_remediation_cr(cr, nhc)

    async def remediate(self, node: Obj, nhc: Obj) -> None:
        """remediate: at most one control plane node at a time, the current template (escalating
        remediations: the next one once the previous timed out), the remediation object created once,
        the status' remediations, and the timeout of an escalating remediation."""
        name = node["metadata"]["name"]
        control_plane = any(k in (node["metadata"].get("labels") or {}) for k in CONTROL_PLANE_ROLES)
        if control_plane and not await self.control_plane_remediation_allowed(name, nhc):
            return  # "skipping remediation for preventing control plane / etcd quorum loss"
        current = await self.current_template_with_timeout(name, nhc)
        if current is None:
            return  # NoTemplateLeftError: "Remediation timed out, and no template left to try"
        template, template_kind, timeout = current
        # GenerateRemediationCRBase: the remediation's kind is the template's without "Template".
        remediation = template_kind.kind.removesuffix(TEMPLATE_SUFFIX)
        kind = await self.kind_of(template_kind.api_version, remediation)
        if kind is None:
            raise ReconcileError(
                f'failed to create remediation CR: no matches for kind "{remediation}" '
                f'in version "{template_kind.api_version}"'
            )
        generated = generate_remediation_cr(name, nhc, template, kind)
        if control_plane:
            generated["metadata"]["labels"][CONTROL_PLANE_CR_LABEL] = ""
        created, cr = await self.create_remediation_cr(generated, kind, nhc)
        if cr is None:
            return  # RemediationCRNotOwned: "CR exists but not owned by us, nothing to do"
        update_status_remediation_started(name, nhc["status"], cr)
        if created or timeout is None:
            return
        started = find_status_remediation(
            name,
            nhc["status"],
            lambda r: (
                _gvk(r["resource"]) == (kind.group, kind.version, kind.kind)
                and r.get("templateName", "") in ("", template["metadata"]["name"])
            ),
        )
        if started is None:
            raise ReconcileError("failed to find started remediation in status for handling timeout")
        if started.get("timedOut"):
            raise ReconcileError("unexpected timout found on started remediation in status")
        now = self.clock()
        timed_out = now > parse_time(started.get("started")) + timeout
        failed = cr_condition(cr, SUCCEEDED) == "False"
        if not timed_out and not failed:
            return
        if cr_condition(cr, SUCCEEDED) != "True":  # addTimeOutAnnotation
            cr["metadata"].setdefault("annotations", {})[TIMED_OUT_ANNOTATION] = go_time(now)
            await self.kube.put(kind.item(cr["metadata"]["name"], cr["metadata"].get("namespace")), cr, MANAGER)
        started["timedOut"] = go_time(now)

    async def control_plane_remediation_allowed(self, node: str, nhc: Obj) -> bool:
        """isControlPlaneRemediationAllowed (without OpenShift's etcd quorum check)."""
        crs = await self.list_remediation_crs(
            nhc, lambda cr: CONTROL_PLANE_CR_LABEL in (cr["metadata"].get("labels") or {})
        )
        if any(node_name_of(cr) == node for cr in crs):
            return True
        return not crs

    async def alert_old_remediation_cr(self, cr: Obj) -> None:
        """alertOldRemediationCR: a remediation object older than 48 h is flagged once."""
        created = parse_time(cr["metadata"].get("creationTimestamp"))
        ann = cr["metadata"].get("annotations") or {}
        if self.clock() > created + OLD_CR_AFTER and OLD_CR_ANNOTATION not in ann:
            cr["metadata"]["annotations"] = {**ann, OLD_CR_ANNOTATION: "flagon"}
            kind = await self.kind_of(cr["apiVersion"], cr["kind"])
            if kind is not None:
                with contextlib.suppress(Conflict):  # upstream logs a failed update and moves on
                    await self.kube.put(kind.item(cr["metadata"]["name"], cr["metadata"].get("namespace")), cr, MANAGER)

    async def patch_status(self, nhc: Obj, orig: Obj) -> None:
        """patchStatus (v0.9.0 L724-758): the phase and reason (Disabled before Paused, L728-733), then a
        merge patch of the status when anything changed (lastUpdateTime moves only then, L756-757)."""
        spec, status = nhc.get("spec") or {}, nhc["status"]
        disabled = next((c for c in status.get("conditions") or [] if c.get("type") == DISABLED), None)
        pauses = spec.get("pauseRequests") or []
        unhealthy = status.get("unhealthyNodes") or []
        if disabled is not None and disabled.get("status") == "True":
            status["phase"] = "Disabled"
            status["reason"] = f"NHC is disabled: {disabled.get('reason')}: {disabled.get('message')}"
        elif pauses:
            status["phase"] = "Paused"
            status["reason"] = f"NHC is paused: {','.join(pauses)}"
        elif any(u.get("remediations") for u in unhealthy):
            status["phase"] = "Remediating"
            status["reason"] = f"NHC is remediating {len(unhealthy)} nodes"
        else:
            status["phase"] = "Enabled"
            status["reason"] = "NHC is enabled, no ongoing remediation"
        # Go's omitempty: empty lists and maps are not written.
        for key in ("unhealthyNodes", "conditions", "inFlightRemediations"):
            if not status.get(key):
                status.pop(key, None)
        if not merge_diff(orig.get("status") or {}, status):
            return  # "no change"
        status["lastUpdateTime"] = go_time(self.clock())  # "only update lastUpdate when there were other changes"
        patch = merge_diff(orig.get("status") or {}, status)
        await merge_patch(self.kube, f"{NHC_API}/nodehealthchecks/{nhc_name(nhc)}/status", {"status": patch}, MANAGER)

    # ------------------------------------------------------------------ resources/templates.go

    async def kind_of(self, api_version: str, kind: str) -> _Kind | None:
        """The REST mapping of a kind, from discovery (controller-runtime's RESTMapper); None if not served."""
        key = (api_version, kind)
        if key not in self._kinds:
            group, _, version = api_version.rpartition("/")
            base = f"/apis/{api_version}" if group else f"/api/{version}"
            doc = await self.kube.get(base)
            found = None
            for r in (doc or {}).get("resources") or []:
                if r.get("kind") == kind and "/" not in r.get("name", ""):
                    found = _Kind(group, version, kind, r["name"], bool(r.get("namespaced")))
            if found is None:
                return None  # not cached: a CRD installed later is found on the next pass
            self._kinds[key] = found
        return self._kinds[key]

    async def get_template(self, ref: Obj) -> tuple[Obj, _Kind]:
        """getTemplateWithFallbackNamespace (no fallback for an NHC): the template object, which must
        have spec.template."""
        api_version, kind_name = str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
        name, ns = str(ref.get("name", "")), str(ref.get("namespace") or "")
        kind = await self.kind_of(api_version, kind_name)
        if kind is None:
            raise _TemplateError(f'no matches for kind "{kind_name}" in version "{api_version}"', not_found=True)
        if kind.namespaced and not ns:
            raise _TemplateError(
                f'remediation template "{name}" not found, it is namespaced, but no namespace is provided',
                not_found=True,
            )
        template = await self.kube.get(kind.item(name, ns))
        if template is None:
            raise _TemplateError(
                f"failed to get external remediation template {ns}/{name}: "
                f'{kind.plural}.{kind.group} "{name}" not found',
                not_found=True,
            )
        if not isinstance((template.get("spec") or {}).get("template"), dict):
            raise _TemplateError(f"invalid template {ns}/{name}, didn't find spec.template.spec", broken=True)
        return template, kind

    async def validate_templates(self, nhc: Obj) -> tuple[bool, str, str]:
        """ValidateTemplates + handleTemplateError + validateTemplate: (valid, reason, message)."""
        for ref in templates_of(nhc):
            try:
                template, _ = await self.get_template(ref)
            except _TemplateError as e:
                if e.not_found:
                    return (
                        False,
                        REASON_DISABLED_TEMPLATE_NOT_FOUND,
                        f"Remediation template not found: {json.dumps(str(e))}",
                    )
                return False, REASON_DISABLED_TEMPLATE_INVALID, f"Remediation template is invalid: {json.dumps(str(e))}"
            if template.get("kind") == "Metal3RemediationTemplate" and template["metadata"].get("namespace") != (
                "openshift-machine-api"
            ):
                return (
                    False,
                    REASON_DISABLED_TEMPLATE_INVALID,
                    "Metal3RemediationTemplate must be in the openshift-machine-api namespace. It is configured to "
                    f"be in namespace: {template['metadata'].get('namespace')}",
                )
        return True, "", ""

    async def current_template_with_timeout(self, node: str, nhc: Obj) -> tuple[Obj, _Kind, timedelta | None] | None:
        """GetCurrentTemplateWithTimeout: the remediationTemplate (no timeout), or the first escalating
        remediation by order that has not timed out for this node yet (None: no template left)."""
        spec = nhc.get("spec") or {}
        if spec.get("remediationTemplate"):
            template, kind = await self.get_template(spec["remediationTemplate"])
            return template, kind, None
        for rem in sorted(spec.get("escalatingRemediations") or [], key=lambda r: r.get("order", 0)):
            ref = rem.get("remediationTemplate") or {}
            group, _, version = str(ref.get("apiVersion", "")).rpartition("/")
            gvk = (group, version, str(ref.get("kind", ""))[: -len(TEMPLATE_SUFFIX)])
            timed_out = find_status_remediation(node, nhc["status"], timed_out_for(gvk, str(ref.get("name", ""))))
            if timed_out is None:
                template, kind = await self.get_template(ref)
                return template, kind, parse_duration(rem.get("timeout"))
        return None

    # ------------------------------------------------------------------ resources/manager.go

    async def get_nodes(self, selector: Obj | None) -> list[Obj]:
        """GetNodes: the nodes the NHC's selector selects."""
        query = urllib.parse.urlencode({"labelSelector": label_selector(selector)})
        return await self.kube.list(f"/api/v1/nodes?{query}")

    async def list_remediation_crs(self, nhc: Obj, keep: Callable[[Obj], bool]) -> list[Obj]:
        """ListRemediationCRs: the remediation objects (every namespace) of each template's kind that
        belong to that template (isMatchNodeTemplate), filtered."""
        out = []
        for ref in templates_of(nhc):
            remediation = str(ref.get("kind", "")).removesuffix(TEMPLATE_SUFFIX)
            kind = await self.kind_of(str(ref.get("apiVersion", "")), remediation)
            if kind is None:
                continue  # "failed to get all remediation objects" is a NotFound here: none exist
            for cr in await self.kube.list(kind.collection()):
                cr.setdefault("apiVersion", kind.api_version)
                cr.setdefault("kind", kind.kind)
                if is_match_node_template(cr, node_name_of(cr), str(ref.get("name", ""))) and keep(cr):
                    out.append(cr)
        return out

    async def handle_healthy_node(self, node: str, cr_name: str, nhc: Obj) -> list[Obj]:
        """HandleHealthyNode: this node's remediation objects, each deleted; none left means healthy."""
        crs = await self.list_remediation_crs(
            nhc, lambda cr: (cr["metadata"]["name"] == cr_name or node_name_of(cr) == node) and is_owner(cr, nhc)
        )
        for cr in crs:
            await self.delete_remediation_cr(cr, nhc)
        return crs

    async def delete_remediation_cr(self, cr: Obj, nhc: Obj) -> bool:
        """DeleteRemediationCR: read again; gone or already being deleted, or not ours: nothing to do."""
        kind = await self.kind_of(cr["apiVersion"], cr["kind"])
        if kind is None:
            return False
        path = kind.item(cr["metadata"]["name"], cr["metadata"].get("namespace"))
        now = await self.kube.get(path)
        if now is None or now["metadata"].get("deletionTimestamp") or not is_owner(now, nhc):
            return False
        await self.kube.delete(path)
        return True

    async def create_remediation_cr(self, generated: Obj, kind: _Kind, nhc: Obj) -> tuple[bool, Obj | None]:
        """CreateRemediationCR: an existing one for this node and template (getCRWithNodeNameAnnotation)
        is kept, and only if this NHC owns it; else it is created. (Node leases are not modelled.)"""
        ann = generated["metadata"]["annotations"]
        existing = None
        for cr in await self.kube.list(kind.collection()):
            if is_match_node_template(cr, ann[NODE_NAME_ANNOTATION], ann[TEMPLATE_NAME_ANNOTATION]):
                existing = cr
                break
        if existing is not None:
            existing.setdefault("apiVersion", kind.api_version)
            existing.setdefault("kind", kind.kind)
            return False, existing if is_owner(existing, nhc) else None
        created = await self.kube.create(kind.collection(generated["metadata"].get("namespace")), generated, MANAGER)
        return True, created


def owned_for_node(nhc: Obj, node: str) -> Callable[[Obj], bool]:
    """The filter Reconcile lists a node's remediation objects with (for the old-CR alert)."""
    return lambda cr: node_name_of(cr) == node and is_owner(cr, nhc)


def timed_out_for(gvk: tuple[str, str, str], template: str) -> Callable[[Obj], bool]:
    """GetCurrentTemplateWithTimeout's filter: a remediation of this kind (and template) that timed out."""
    return lambda r: (
        _gvk(r["resource"]) == gvk and bool(r.get("timedOut")) and r.get("templateName", "") in ("", template)
    )


def templates_of(nhc: Obj) -> list[Obj]:
    """utils.GetAllRemediationTemplates."""
    spec = nhc.get("spec") or {}
    if spec.get("remediationTemplate"):
        return [spec["remediationTemplate"]]
    return [r.get("remediationTemplate") or {} for r in spec.get("escalatingRemediations") or []]


def is_match_node_template(cr: Obj, node: str, template: str) -> bool:
    """manager.isMatchNodeTemplate: by name, or by the node-name and template-name annotations."""
    ann = cr["metadata"].get("annotations")
    if not ann or TEMPLATE_NAME_ANNOTATION not in ann:
        return bool(cr["metadata"]["name"] == node)
    return bool(ann[TEMPLATE_NAME_ANNOTATION] == template and ann.get(NODE_NAME_ANNOTATION) == node)


def generate_remediation_cr(node: str, nhc: Obj, template: Obj, kind: _Kind) -> Obj:
    """GenerateRemediationCRForNode / generateRemediationCR: spec from the template's
    spec.template.spec; named after the node, or `<node>-` + a random suffix when the template's
    remediator supports several templates; node-name and template-name annotations; the template's
    namespace; the NHC as (non-controller) owner."""
    meta: Obj = {
        "annotations": {NODE_NAME_ANNOTATION: node, TEMPLATE_NAME_ANNOTATION: template["metadata"]["name"]},
        "labels": dict(PART_OF),
        "ownerReferences": [
            {
                "apiVersion": NHC_API_VERSION,
                "kind": "NodeHealthCheck",
                "name": nhc_name(nhc),
                "uid": nhc["metadata"]["uid"],
                "controller": False,
            }
        ],
    }
    if MULTIPLE_TEMPLATES_ANNOTATION in (template["metadata"].get("annotations") or {}):
        meta["generateName"] = f"{node}-"
    else:
        meta["name"] = node
    if template["metadata"].get("namespace"):
        meta["namespace"] = template["metadata"]["namespace"]
    body: Obj = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}
    spec = ((template.get("spec") or {}).get("template") or {}).get("spec")
    if spec is not None:
        body["spec"] = copy.deepcopy(spec)
    return body


def _gvk(ref: Obj) -> tuple[str, str, str]:
    group, _, version = str(ref.get("apiVersion", "")).rpartition("/")
    return group, version, str(ref.get("kind", ""))


# ---------------------------------------------------------------------- resources/status.go


def _unhealthy(status: Obj) -> list[Obj]:
    got = status.get("unhealthyNodes")
    if not isinstance(got, list):
        got = status["unhealthyNodes"] = []
    return got


def update_status_remediation_started(node: str, status: Obj, cr: Obj) -> None:
    """UpdateStatusRemediationStarted: the remediation object in the node's entry (once per kind)."""
    meta = cr["metadata"]
    remediation: Obj = {
        "resource": {
            k: v
            for k, v in (
                ("kind", cr.get("kind")),
                ("namespace", meta.get("namespace")),
                ("name", meta.get("name")),
                ("uid", meta.get("uid")),
                ("apiVersion", cr.get("apiVersion")),
            )
            if v
        },
        "started": meta.get("creationTimestamp"),
    }
    if template_name_of(cr):
        remediation["templateName"] = template_name_of(cr)
    for entry in _unhealthy(status):
        if entry.get("name") == node:
            rems = entry.setdefault("remediations", [])
            if not any(_gvk(r["resource"]) == _gvk(remediation["resource"]) for r in rems):
                rems.append(remediation)
            return
    _unhealthy(status).append({"name": node, "remediations": [remediation]})


def update_status_node_healthy(node: str, status: Obj) -> None:
    """UpdateStatusNodeHealthy: the node leaves status.unhealthyNodes."""
    status["unhealthyNodes"] = [u for u in _unhealthy(status) if u.get("name") != node]


def update_status_node_unhealthy(node: str, status: Obj) -> None:
    """UpdateStatusNodeUnhealthy: the node is in status.unhealthyNodes (without remediations yet)."""
    if not any(u.get("name") == node for u in _unhealthy(status)):
        _unhealthy(status).append({"name": node})


def update_status_node_conditions_healthy(node: str, status: Obj, now: datetime) -> None:
    """UpdateStatusNodeConditionsHealthy: when the node's conditions turned healthy again while its
    remediation objects still exist."""
    for u in _unhealthy(status):
        if u.get("name") == node:
            u.setdefault("conditionsHealthyTimestamp", go_time(now))


def find_status_remediation(node: str, status: Obj, keep: Callable[[Obj], bool]) -> Obj | None:
    """FindStatusRemediation."""
    for u in status.get("unhealthyNodes") or []:
        if u.get("name") == node:
            for r in u.get("remediations") or []:
                if keep(r):
                    return r  # the live entry: remediate() marks it timed out in place
    return None
