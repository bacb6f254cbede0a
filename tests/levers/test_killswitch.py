"""killswitch narrows a tenant's EFFECTIVE level: its own key, else the `default` tenant's key. A
level that would widen it is refused with the figures; with neither key only the narrowest level
goes (the gateway's own default can't be read, and `none` can't widen it)."""

from __future__ import annotations

import re
import shlex

from fbworld.kube import samples
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import SEC, kubectl, patches, say

CM = ("configmap", "toolgw-flags", "toolgw")


def flags(cells) -> dict[str, str]:
    return cells.east3.get(*CM)["data"]


async def pull(app, inc, args: str) -> str:
    return await say(app, f"lever killswitch toolgw/toolgw-flags --cell us-east-3 {args}", SEC, inc.channel_id)


async def test_a_tenant_without_a_key_is_not_widened_past_default(app, cells):
    cells.east3.put(samples.configmap_toolgw(data={"default.max_side_effect": "read", "acme.max_side_effect": "write"}))
    inc = await app.declare(roles={"security": SEC})
    before = cells.east3.get(*CM)

    out = await pull(app, inc, "tenant=newco level=money")
    assert out == (
        "REQ-1 killswitch toolgw/toolgw-flags (us-east-3) not pulled, nothing changed: The killswitch only "
        "narrows: newco has no key; its effective level is default's `read`; `money` would widen it."
    ), out
    assert not patches(cells.east3) and cells.east3.get(*CM) == before
    [entry] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.lever"]
    assert entry["detail"]["result"] == "refused" and entry["detail"]["reason"] == out

    # Its own key counts first: acme is at `write`, so `money` widens acme too.
    out = await pull(app, inc, "tenant=acme level=money")
    assert "only narrows: acme's own `acme.max_side_effect` is `write`; `money` would widen it" in out, out
    assert not patches(cells.east3)


async def test_narrowing_a_tenant_without_a_key_is_allowed_and_a_person_restores_it(app, cells):
    cells.east3.put(samples.configmap_toolgw(data={"default.max_side_effect": "read"}))
    inc = await app.declare(roles={"security": SEC})

    out = await pull(app, inc, "tenant=newco level=none")
    assert "applied and verified (newco.max_side_effect=none" in out, out
    assert flags(cells) == {"default.max_side_effect": "read", "newco.max_side_effect": "none"}
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.notes == ["newco: `read` → `none` (it had no key: `read` was default's)"]

    # The API server lets Firebreak only narrow (deploy/admission): undo is refused, and names the line
    # a person runs to put back exactly what Firebreak found (here: no key, so the key goes).
    out = await say(app, "undo REQ-1", SEC, inc.channel_id)
    assert "can't be undone by Firebreak: the API server lets Firebreak only narrow the kill switch" in out, out
    line = re.search(r"To put it back: `(kubectl [^`]+)`", out)
    assert line, out
    assert flags(cells) == {"default.max_side_effect": "read", "newco.max_side_effect": "none"}  # nothing undone
    await kubectl(cells.kubeconfig, "us-east-3", *shlex.split(line.group(1))[3:])  # less "kubectl --context us-east-3"
    assert flags(cells) == {"default.max_side_effect": "read"}  # no key again: default's level applies

    # Pinning a tenant at its effective level widens nothing either.
    assert "applied and verified" in await pull(app, inc, "tenant=other level=read")
    assert flags(cells) == {"default.max_side_effect": "read", "other.max_side_effect": "read"}


async def test_with_neither_key_only_the_narrowest_level_goes(app, cells):
    cells.east3.put(samples.configmap_toolgw(data={"acme.max_side_effect": "write"}))
    inc = await app.declare(roles={"security": SEC})

    out = await pull(app, inc, "tenant=newco level=read")
    assert out.endswith(
        "not pulled, nothing changed: neither `newco.max_side_effect` nor `default.max_side_effect` is set, "
        "so the tool gateway's own default applies, and Firebreak can't tell newco's effective level: only "
        "`level=none` (the narrowest) is certain to narrow it. Pull it with level=none."
    ), out
    assert not patches(cells.east3)

    # Containment stays possible: `none` narrows whatever the gateway's default is; the plan says why.
    out = await say(app, "lever killswitch toolgw/toolgw-flags tenant=newco level=none --dry-run", SEC, inc.channel_id)
    assert "the tool gateway's own default applies: `none` is the narrowest level" in out, out
    out = await pull(app, inc, "tenant=newco level=none")
    assert "applied and verified (newco.max_side_effect=none" in out, out
    assert flags(cells) == {"acme.max_side_effect": "write", "newco.max_side_effect": "none"}
