"""Structural-schema handling for custom resources, plus light checks for
built-in kinds.

Order mirrors the apiserver: prune unknown fields -> apply defaults ->
validate. x-kubernetes-validations (CEL rules) are ignored.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema

# Fields every object may carry regardless of its schema.
_ROOT_KEEP = {"apiVersion", "kind", "metadata"}


# -------------------------------------------------------------------- pruning


def prune(obj: Any, schema: dict | None, path: str = "") -> list[str]:
    """Drop fields the schema does not know, in place; return their paths.

    Like real structural schemas, nulls in non-nullable fields are dropped
    too (silently), so that a default can take their place.
    """
    removed: list[str] = []
    if not schema:
        return removed
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") is True or addl is True
        for k in list(obj):
            child = f"{path}.{k}" if path else k
            if not path and k in _ROOT_KEEP:
                continue
            if k in props:
                sub = props[k]
            elif isinstance(addl, dict):
                sub = addl
            elif keep_unknown:
                continue
            else:
                del obj[k]
                removed.append(child)
                continue
            if obj[k] is None and not sub.get("nullable"):
                del obj[k]
                continue
            removed += prune(obj[k], sub, child)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            removed += prune(item, schema["items"], f"{path}[{i}]")
    return removed


# ------------------------------------------------------------------ defaulting


def apply_defaults(obj: Any, schema: dict | None) -> None:
    """Fill `default:` values for missing properties, top-down, in place."""
    if not schema:
        return
    if isinstance(obj, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in obj and "default" in sub:
                obj[k] = copy.deepcopy(sub["default"])
            if k in obj:
                apply_defaults(obj[k], sub)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for k, v in obj.items():
                if k not in (schema.get("properties") or {}):
                    apply_defaults(v, addl)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


# ------------------------------------------------------------------ validation


def to_jsonschema(node: Any, root: bool = True) -> Any:
    """Translate a Kubernetes OpenAPI v3 schema into plain JSON Schema."""
    if isinstance(node, list):
        return [to_jsonschema(n, False) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k.startswith("x-kubernetes-") or k in ("nullable", "description", "format", "default"):
            continue  # format is advisory in k8s for most values; skip it
        if k in ("properties", "patternProperties"):
            out[k] = {pk: to_jsonschema(pv, False) for pk, pv in v.items()}
        else:
            out[k] = to_jsonschema(v, False)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.pop("anyOf", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if root:
        # Metadata is validated by the apiserver's ObjectMeta code, not the
        # CRD schema; the fake only requires a name (checked elsewhere).
        out.setdefault("properties", {})["metadata"] = {"type": "object"}
    return out


# id(schema) -> (schema, validator); holding the schema keeps the id unique.
_compiled: dict[int, tuple[dict, Any]] = {}


def _validator(schema: dict):
    key = id(schema)
    if key not in _compiled:
        _compiled[key] = (schema, jsonschema.Draft7Validator(to_jsonschema(schema)))
    return _compiled[key][1]


def _field(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _fmt(v: Any) -> str:
    return json.dumps(v) if isinstance(v, str) else json.dumps(v, default=str)


def _cause(err: jsonschema.ValidationError) -> dict:
    field = _field(err.absolute_path)
    v = err.validator
    if v == "required":
        missing = err.message.split("'")[1] if "'" in err.message else "?"
        field = f"{field}.{missing}" if field else missing
        return {"reason": "FieldValueRequired", "field": field, "message": "Required value"}
    if v == "enum":
        allowed = ", ".join(_fmt(x) for x in err.validator_value)
        return {
            "reason": "FieldValueNotSupported",
            "field": field,
            "message": f"Unsupported value: {_fmt(err.instance)}: supported values: {allowed}",
        }
    if v == "type":
        t = err.validator_value
        return {
            "reason": "FieldValueTypeInvalid",
            "field": field,
            "message": f"Invalid value: {_fmt(type(err.instance).__name__)}: "
            f"{field} in body must be of type {t}: {_fmt(err.instance)}",
        }
    return {
        "reason": "FieldValueInvalid",
        "field": field,
        "message": f"Invalid value: {_fmt(err.instance)[:200]}: {err.message[:300]}",
    }


def validate_custom(obj: dict, schema: dict | None) -> list[dict]:
    if not schema:
        return []
    errors = sorted(_validator(schema).iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [_cause(e) for e in errors]


# ------------------------------------------------------- built-in light checks

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def validate_builtin(kind: str, obj: dict) -> list[dict]:
    causes: list[dict] = []

    def bad(field: str, message: str, reason: str = "FieldValueInvalid") -> None:
        causes.append({"reason": reason, "field": field, "message": message})

    spec = obj.get("spec") or {}
    if kind == "ConfigMap":
        for section in ("data", "binaryData"):
            for k, v in (obj.get(section) or {}).items():
                if not isinstance(v, str):
                    bad(f"{section}[{k}]", f"Invalid value: {_fmt(v)}: must be a string")
    elif kind == "Node":
        for i, t in enumerate(spec.get("taints") or []):
            if not t.get("key"):
                bad(f"spec.taints[{i}].key", "Required value", "FieldValueRequired")
            if t.get("effect") not in _TAINT_EFFECTS:
                allowed = ", ".join(_fmt(e) for e in _TAINT_EFFECTS)
                bad(
                    f"spec.taints[{i}].effect",
                    f"Unsupported value: {_fmt(t.get('effect'))}: supported values: {allowed}",
                    "FieldValueNotSupported",
                )
    elif kind == "Pod":
        containers = spec.get("containers")
        if not containers:
            bad("spec.containers", "Required value", "FieldValueRequired")
        for i, c in enumerate(containers or []):
            if not c.get("name"):
                bad(f"spec.containers[{i}].name", "Required value", "FieldValueRequired")
    elif kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        r = spec.get("replicas", 1)
        if not isinstance(r, int) or r < 0:
            bad("spec.replicas", f"Invalid value: {_fmt(r)}: must be greater than or equal to 0")
        if not spec.get("selector"):
            bad("spec.selector", "Required value", "FieldValueRequired")
        else:
            # ValidateReplicaSetSpec / ValidateDeploymentSpec: the selector must select the template.
            wanted = (spec.get("selector") or {}).get("matchLabels") or {}
            labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            if any(labels.get(k) != v for k, v in wanted.items()):
                bad(
                    "spec.template.metadata.labels",
                    f"Invalid value: {_fmt(labels)}: `selector` does not match template `labels`",
                )
    return causes


# ------------------------------------------------------------- object metadata
# apimachinery ValidateObjectMeta's label/annotation checks, with the v1.32 messages
# (k8s.io/apimachinery/pkg/util/validation: IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain).

_QNAME_CHAR = "[A-Za-z0-9]"
_QNAME_FMT = f"({_QNAME_CHAR}[-A-Za-z0-9_.]*)?{_QNAME_CHAR}"
_QNAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _full(fmt: str, value: str) -> bool:
    return re.fullmatch(fmt, value) is not None


def _dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _full(_DNS1123_SUBDOMAIN_FMT, value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in _dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _full(_QNAME_FMT, name):
        errs.append("name part " + _regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _full(_LABEL_VALUE_FMT, value):
        errs.append(_regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


_JSON_KIND = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}


def meta_type_error(obj: dict, builtin: bool) -> str | None:
    """The JSON decode error the apiserver hits when labels/annotations are not maps of strings
    (Go's encoding/json UnmarshalTypeError text), or None."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    for fld in ("labels", "annotations"):
        value = meta.get(fld)
        where = f"ObjectMeta.metadata.{fld}" if builtin else f"ObjectMeta.{fld}"
        if value is None:
            continue
        if not isinstance(value, dict):
            kind = _JSON_KIND.get(type(value), "value")
            return f"json: cannot unmarshal {kind} into Go struct field {where} of type map[string]string"
        for v in value.values():
            if v is not None and not isinstance(v, str):
                kind = _JSON_KIND.get(type(v), "value")
                return f"json: cannot unmarshal {kind} into Go struct field {where} of type string"
    return None


def validate_object_meta(obj: dict) -> list[dict]:
    """ValidateLabels + ValidateAnnotations as Status causes (field metadata.labels / metadata.annotations)."""
    meta = obj.get("metadata") or {}
    causes: list[dict] = []

    def invalid(fld: str, value: str, msg: str) -> None:
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": f"metadata.{fld}",
                "message": f"Invalid value: {_fmt(value)}: {msg}",
            }
        )

    for k, v in sorted((meta.get("labels") or {}).items()):
        for msg in qualified_name_errors(k):
            invalid("labels", k, msg)
        for msg in label_value_errors(v or ""):
            invalid("labels", v, msg)
    annotations = meta.get("annotations") or {}
    for k in sorted(annotations):
        # The rule is QualifiedName except that case doesn't matter.
        for msg in qualified_name_errors(k.lower()):
            invalid("annotations", k, msg)
    if sum(len(k) + len(v or "") for k, v in annotations.items()) > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(
            {
                "reason": "FieldValueTooLong",
                "field": "metadata.annotations",
                "message": f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes",
            }
        )
    return causes
