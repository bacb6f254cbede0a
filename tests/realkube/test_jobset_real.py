"""The real JobSet controller (sigs.k8s.io/jobset v0.12.0, tests/support/jobset_controller.py) on the
real kube-apiserver: what it writes when a JobSet is created, suspended and resumed; then the
product's jobset-suspend lever (a JobSet not queued through Kueue) through the real app, against it.

No kube-controller-manager runs, so no Job controller: the Jobs get no pods and no status. Everything
asserted is what JobSet itself writes (its child Jobs, their spec.suspend, its status), read as admin."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from fbworld.kube import samples
from levers import hooks
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support.jobset_controller import NAME_LABEL, JobSetController, complete_job, jobs_of
from tests.support.kube_apiserver import KubeAPIServer, cond
from tests.support.kube_apiserver import until_read as until
from tests.support.levers import OPS, replace_hook, say

NS = "realkube-jobset"
JS = "jobset.jobset.x-k8s.io"


def two_by_two(ns: str, name: str) -> dict:
    """A JobSet of two ReplicatedJobs of two Jobs each, nothing else managing it."""
    js = samples.jobset(ns, name)
    workers = js["spec"]["replicatedJobs"][0]
    workers.update(replicas=2)
    workers["template"]["spec"].update(parallelism=2, completions=2)
    driver = json.loads(json.dumps(workers))
    driver["name"] = "driver"
    js["spec"]["replicatedJobs"].append(driver)
    return js


def suspended(jobs: list[dict]) -> list[bool]:
    return [bool(j["spec"].get("suspend")) for j in jobs]


async def test_a_jobset_makes_its_jobs_and_suspend_and_resume_reach_them(
    kube_apiserver: KubeAPIServer,
    jobset_controller: JobSetController,
):
    s = kube_apiserver
    await asyncio.to_thread(s.namespace, NS)
    await asyncio.to_thread(s.apply, two_by_two(NS, "train"))
    try:
        stored = await asyncio.to_thread(s.get, JS, "train", NS)
        # JobSet's mutating webhook, called by the API server through the url client config.
        assert stored["spec"]["network"]["enableDNSHostnames"] is True
        assert stored["spec"]["successPolicy"] == {"operator": "All"}
        assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"

        jobs = await until(lambda: jobs_of(s, NS, "train"), lambda js: len(js) == 4)
        assert [j["metadata"]["name"] for j in jobs] == [
            "train-driver-0",
            "train-driver-1",
            "train-workers-0",
            "train-workers-1",
        ]
        for j in jobs:
            (owner,) = j["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
                "JobSet",
                "train",
                stored["metadata"]["uid"],
                True,
            )
            assert j["spec"]["template"]["spec"]["subdomain"] == "train"  # the headless Service's name
        assert suspended(jobs) == [False] * 4
        svc = await asyncio.to_thread(s.get, "service", "train", NS)
        assert svc["spec"]["clusterIP"] == "None"

        # Suspend: every child Job gets spec.suspend=true, and the JobSet says so in its status.
        await asyncio.to_thread(
            s.kubectl, "patch", JS, "train", "-n", NS, "--type", "merge", "-p", '{"spec":{"suspend":true}}'
        )
        jobs = await until(lambda: jobs_of(s, NS, "train"), lambda js: suspended(js) == [True] * 4)
        got = await until(
            lambda: s.get(JS, "train", NS),
            lambda o: (
                cond(o, "Suspended").get("status") == "True"
                and all(r.get("suspended") == 2 for r in o["status"].get("replicatedJobsStatus") or [])
            ),
        )
        c = cond(got, "Suspended")
        assert (c["reason"], c["message"]) == ("SuspendedJobs", "jobset is suspended")
        assert {r["name"] for r in got["status"]["replicatedJobsStatus"]} == {"driver", "workers"}
        # Written by the controller's own client (User-Agent "jobset/<version> ...": field manager "jobset").
        assert all("jobset" in {m["manager"] for m in j["metadata"]["managedFields"]} for j in jobs), jobs
        status_managers = {m["manager"] for m in got["metadata"]["managedFields"] if m.get("subresource") == "status"}
        assert status_managers == {"jobset"}, status_managers

        # Resume: the Jobs run again and the condition turns False (ResumeJobs).
        await asyncio.to_thread(
            s.kubectl, "patch", JS, "train", "-n", NS, "--type", "merge", "-p", '{"spec":{"suspend":false}}'
        )
        await until(lambda: jobs_of(s, NS, "train"), lambda js: suspended(js) == [False] * 4)
        got = await until(lambda: s.get(JS, "train", NS), lambda o: cond(o, "Suspended").get("status") == "False")
        c = cond(got, "Suspended")
        assert (c["reason"], c["message"]) == ("ResumeJobs", "jobset is resumed")
    finally:
        await asyncio.to_thread(s.delete, JS, "train", namespace=NS)
        await asyncio.to_thread(
            s.kubectl, "delete", "jobs.batch", "-n", NS, "-l", f"{NAME_LABEL}=train", "--wait=false"
        )


async def pull(app, command: str, channel: str) -> tuple[str, Any]:
    """Pull a lever as OPS (the IC approves when asked); its request as stored."""
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    store = lever_store(app.services)
    out = await say(app, command, OPS, channel, timeout=60)
    req = re.search(r"\bREQ-\d+\b", out)
    assert req, out
    if asked:
        assert await store.transition(asked[-1].id, {"pending_approval"}, "approved", approved_by="U_IC")
        out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
    return out, await store.get(req.group(0))


async def test_jobset_suspend_pulls_verifies_and_undoes_against_the_real_controller(
    app,
    deployed: KubeAPIServer,
    jobset_controller: JobSetController,
):
    s = deployed
    ns, name = "train-llm", "real-js-lever"  # a namespace the policy grants jobset-suspend in
    await asyncio.to_thread(s.namespace, ns)
    await asyncio.to_thread(s.apply, two_by_two(ns, name))
    try:
        await until(lambda: jobs_of(s, ns, name), lambda js: len(js) == 4 and suspended(js) == [False] * 4)
        inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})
        out, rec = await pull(app, f"lever jobset-suspend {ns}/{name} --cell us-east-3", inc.channel_id)
        assert rec.state == "done" and rec.result.get("verified") is True, (out, rec.result)
        # Verified on what the JobSet controller wrote, not on the lever's own write.
        assert "the JobSet controller suspended its Jobs" in out, out
        got = await asyncio.to_thread(s.get, JS, name, ns)
        assert got["spec"]["suspend"] is True and cond(got, "Suspended")["status"] == "True"
        await until(lambda: jobs_of(s, ns, name), lambda js: suspended(js) == [True] * 4)

        undo = await app.run(f"undo {rec.id}", user=OPS, channel=inc.channel_id)
        assert "undone" in undo and (await lever_store(app.services).get(rec.id)).state == "undone", undo
        assert (await asyncio.to_thread(s.get, JS, name, ns))["spec"]["suspend"] is False
        await until(lambda: jobs_of(s, ns, name), lambda js: suspended(js) == [False] * 4)
        got = await until(lambda: s.get(JS, name, ns), lambda o: cond(o, "Suspended").get("status") == "False")
        assert cond(got, "Suspended")["reason"] == "ResumeJobs"
    finally:
        await asyncio.to_thread(s.delete, JS, name, namespace=ns)
        await asyncio.to_thread(
            s.kubectl, "delete", "jobs.batch", "-n", ns, "-l", f"{NAME_LABEL}={name}", "--wait=false"
        )


async def test_jobset_suspend_is_not_verified_when_no_controller_acts_on_it(
    app,
    deployed: KubeAPIServer,
    jobset_controller: JobSetController,
):
    """spec.managedBy names another controller (as MultiKueue does): the JobSet controller skips it, so
    spec.suspend=true stops nothing here. Reading back the lever's own write would call it verified."""
    s = deployed
    ns, name = "train-llm", "real-js-elsewhere"
    js = two_by_two(ns, name)
    js["spec"]["managedBy"] = "example.com/other-controller"
    await asyncio.to_thread(s.namespace, ns)
    await asyncio.to_thread(s.apply, js)
    try:
        inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})
        out, rec = await pull(app, f"lever jobset-suspend {ns}/{name} --cell us-east-3", inc.channel_id)
        assert rec.result.get("verified") is False, (out, rec.result)
        assert "managed by example.com/other-controller" in out, out
        assert not await asyncio.to_thread(jobs_of, s, ns, name)  # the controller never touched it
    finally:
        await asyncio.to_thread(s.delete, JS, name, namespace=ns)


async def test_jobset_suspend_refuses_a_finished_jobset(
    app,
    deployed: KubeAPIServer,
    jobset_controller: JobSetController,
):
    """JobSet deletes a finished JobSet's remaining Jobs and ignores its spec.suspend (jobSetFinished
    returns before the suspend handling): no Suspended condition ever comes, so nothing to stop."""
    s = deployed
    ns, name = "train-llm", "real-js-done"
    js = samples.jobset(ns, name)
    js["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism=1, completions=1)
    await asyncio.to_thread(s.namespace, ns)
    await asyncio.to_thread(s.apply, js)
    try:
        (job,) = await until(lambda: jobs_of(s, ns, name), lambda js: len(js) == 1)
        await asyncio.to_thread(complete_job, s, ns, job)
        done = await until(lambda: s.get(JS, name, ns), lambda o: o.get("status", {}).get("terminalState"))
        assert done["status"]["terminalState"] == "Completed" and cond(done, "Completed")["status"] == "True"
        rv = done["metadata"]["resourceVersion"]

        inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})
        out = await say(app, f"lever jobset-suspend {ns}/{name} --cell us-east-3", OPS, inc.channel_id, timeout=60)
        assert f"not pulled, nothing changed: JobSet {ns}/{name} has finished (Completed=True, AllJobsCompleted)" in out
        assert "never suspends it, so there is nothing to stop." in out, out
        after = await asyncio.to_thread(s.get, JS, name, ns)
        assert after["metadata"]["resourceVersion"] == rv and after["spec"].get("suspend") is False
    finally:
        await asyncio.to_thread(s.delete, JS, name, namespace=ns)
        await asyncio.to_thread(
            s.kubectl, "delete", "jobs.batch", "-n", ns, "-l", f"{NAME_LABEL}={name}", "--wait=false"
        )
