"""Issue 35 item 7: `audit verify` cannot be talked into OK by whoever writes Redis.

The forger edits Redis directly: rewrites the whole chain, deletes or trims the checkpoint copies,
plants a claim or a future `at`. Verify must then exit non-zero with the reason; a signer stopped
from signing shows in `firebreak_audit_checkpoint_age_seconds` and the shipped alert fires on it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from bot.audit.sign import EVERY_SECONDS, Checkpointer, load_private_key
from bot.clock import ManualClock
from bot.store import Keys
from fbworld.slack import FakeSlack
from tests.audit.test_signed_checkpoints import _entries, _jsonl, _rewrite, _write_300, cli, keys, signed  # noqa: F401
from tests.support.core import run_cli
from tests.support.deploy import one, render
from tests.support.harness import RunningApp, start_app
from tests.support.services import find_binary
from tests.support.telemetry import scrape

AGE = "firebreak_audit_checkpoint_age_seconds"


@pytest.fixture
async def live(slack: FakeSlack, redis_url: str, keys) -> RunningApp:  # noqa: F811
    """A signing app whose clock starts at the real time: verify compares checkpoints with its own clock."""
    running = await start_app(slack, redis_url, ManualClock(time.time()), firebreak_audit_key=keys[0])
    yield running
    await running.stop()


async def _rewrite_all(app: RunningApp) -> None:
    r = app.services.redis
    entries = await _entries(r)
    entries[0]["actor"] = "UMALLORY"
    await _rewrite(r, entries, 1)


async def test_plain_verify_after_a_full_rewrite_does_not_say_ok_when_checkpoints_are_signed(
    signed,  # noqa: F811
    redis_url,
    keys,  # noqa: F811
):
    await _write_300(signed)
    await _rewrite_all(signed)
    out = cli(redis_url, "verify")  # the Redis copies show the bot signs
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "--pubkey" in out.stderr and "--checkpoints" in out.stderr and "OK" not in out.stdout, out.stderr
    await signed.services.redis.delete(Keys.AUDIT_CHECKPOINTS)  # the forger removes that hint too
    out = run_cli("audit", "verify", env={"REDIS_URL": redis_url, "FIREBREAK_AUDIT_KEY": str(keys[0])})
    assert out.returncode == 3 and "FIREBREAK_AUDIT_KEY is set" in out.stderr, (out.stdout, out.stderr)


async def test_pubkey_without_checkpoints_from_outside_redis_is_never_ok(signed, redis_url, keys):  # noqa: F811
    made = await _write_300(signed)
    pub = str(keys[1])
    out = cli(redis_url, "verify", "--pubkey", pub)  # untouched, but only Redis's copies vouch for it
    assert out.returncode == 3 and "no checkpoint from outside Redis" in out.stderr, (out.stdout, out.stderr)
    await _rewrite_all(signed)
    r = signed.services.redis
    await r.delete(Keys.AUDIT_CHECKPOINTS)  # deleted
    out = cli(redis_url, "verify", "--pubkey", pub)
    assert out.returncode == 3 and "no checkpoint from outside Redis" in out.stderr, (out.stdout, out.stderr)
    await r.rpush(Keys.AUDIT_CHECKPOINTS, json.dumps(made[0]))  # trimmed to the first
    out = cli(redis_url, "verify", "--pubkey", pub)
    assert out.returncode != 0 and "signed up to" not in out.stdout, (out.stdout, out.stderr)


async def test_a_checkpoints_file_cut_short_or_with_a_hole_is_not_ok(live, redis_url, keys, tmp_path):  # noqa: F811
    made = await _write_300(live)
    assert [c["seq"] for c in made] == [1, 101, 201, 300]
    pub = str(keys[1])
    ok = cli(redis_url, "verify", "--pubkey", pub, "--checkpoints", str(_jsonl(tmp_path / "all", made)))
    assert ok.returncode == 0 and "signed up to seq 300" in ok.stdout, (ok.stdout, ok.stderr)
    # The forger trimmed the channel's newest posts: the head is 199 entries past what is given.
    out = cli(redis_url, "verify", "--pubkey", pub, "--checkpoints", str(_jsonl(tmp_path / "short", made[:2])))
    assert out.returncode == 3 and "seq 101" in out.stderr and "head is seq 300" in out.stderr, out.stderr
    # ...or took one from the middle: 200 entries between two given checkpoints.
    hole = _jsonl(tmp_path / "hole", [made[0], made[2], made[3]])
    out = cli(redis_url, "verify", "--pubkey", pub, "--checkpoints", str(hole))
    assert out.returncode == 3 and "seq 2-201" in out.stderr, (out.stdout, out.stderr)
    # A directory of kept files (the log pipeline's days) is read whole.
    days = tmp_path / "days"
    days.mkdir()
    _jsonl(days / "1.jsonl", made[:2])
    _jsonl(days / "2.jsonl", made[2:])
    out = cli(redis_url, "verify", "--pubkey", pub, "--checkpoints", str(days))
    assert out.returncode == 0 and "signed up to seq 300" in out.stdout, (out.stdout, out.stderr)


async def test_entries_left_unsigned_longer_than_the_cadence_are_named(live, redis_url, keys, tmp_path):  # noqa: F811
    made = await _write_300(live)
    await live.services.audit.append("command.update", actor="U1", detail={})
    live.clock.advance(600)  # the signer was kept from signing for ten minutes
    late = await live.checkpoints.final()
    assert late is not None and late["seq"] == 301
    out = cli(
        redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(_jsonl(tmp_path / "c", [*made, late]))
    )
    assert out.returncode == 3 and "seq 301-301" in out.stderr and "600 s" in out.stderr, (out.stdout, out.stderr)


async def test_a_future_at_or_a_skewed_replica_does_not_stop_the_signer(signed, keys):  # noqa: F811
    audit, clock, r = signed.services.audit, signed.clock, signed.services.redis
    for i in range(5):
        await audit.append("command.update", actor="U1", detail={"i": i})
    first = await signed.checkpoints.maybe()
    assert first is not None
    # The forger rewrites the copy's time a year ahead (the signature still verifies).
    copy = json.loads(await r.lindex(Keys.AUDIT_CHECKPOINTS, -1))
    await r.lset(Keys.AUDIT_CHECKPOINTS, -1, json.dumps({**copy, "at": clock.now() + 365 * 86400}))
    replica = Checkpointer(r, clock, load_private_key(keys[0]))
    await audit.append("command.update", actor="U1", detail={})
    clock.advance(EVERY_SECONDS)
    got = await replica.maybe()
    assert got is not None and got["seq"] == 6
    # A replica whose clock runs a day ahead signs with that time: the others do not wait for it.
    skewed = Checkpointer(r, ManualClock(clock.now() + 86400), load_private_key(keys[0]))
    await audit.append("command.update", actor="U1", detail={})
    assert (await skewed.maybe(force=True) or {}).get("seq") == 7
    await audit.append("command.update", actor="U1", detail={})
    clock.advance(EVERY_SECONDS)
    assert (await replica.maybe() or {}).get("seq") == 8


async def test_a_held_claim_grows_the_checkpoint_age_on_metrics(signed):  # noqa: F811
    audit, clock, r = signed.services.audit, signed.clock, signed.services.redis
    await audit.append("command.update", actor="U1", detail={})
    assert await signed.checkpoints.maybe() is not None
    assert (await scrape(signed)).value(AGE) == 0
    # The forger claims the next seqs so no replica signs them.
    for seq in range(2, 40):
        await r.set(Keys.audit_checkpoint_claim(seq), "mallory")
    await audit.append("command.update", actor="U1", detail={})
    ages = []
    for _ in range(12):
        clock.advance(EVERY_SECONDS)
        assert await signed.checkpoints.maybe() is None
        ages.append((await scrape(signed)).value(AGE))
    assert ages == sorted(ages) and ages[-1] >= 11 * EVERY_SECONDS, ages
    # Released: the next checkpoint covers the head and the age is 0 again.
    await r.delete(Keys.audit_checkpoint_claim(2))
    assert (await signed.checkpoints.maybe() or {}).get("seq") == 2
    assert (await scrape(signed)).value(AGE) == 0


def _alert_rules() -> list[dict]:
    groups = one(render("overlays/fleet"), "PrometheusRule", "firebreak")["spec"]["groups"]
    for rule in (r for g in groups for r in g["rules"]):
        rule["annotations"].pop("description", None)
    return groups


def test_the_shipped_alert_fires_on_a_growing_age_and_not_on_the_normal_sawtooth(tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": _alert_rules()}))
    name = "FirebreakAuditCheckpointsStalled"
    tests = [
        {
            "interval": "1m",
            "input_series": [
                # One replica, stuck from minute 0: the age grows 60 s a minute.
                {"series": f'{AGE}{{job="firebreak", instance="10.0.0.1:3000"}}', "values": "0+60x30"},
                # The other one signs: its view goes back to 0 each minute.
                {"series": f'{AGE}{{job="firebreak", instance="10.0.0.2:3000"}}', "values": "30 0 45 0 30 0 50x25"},
            ],
            "alert_rule_test": [
                {"eval_time": "3m", "alertname": name, "exp_alerts": []},
                {
                    "eval_time": "20m",
                    "alertname": name,
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "critical"},
                            "exp_annotations": {"summary": "The audit chain's head has gone unsigned"},
                        }
                    ],
                },
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                {"series": f'{AGE}{{job="firebreak", instance="10.0.0.1:3000"}}', "values": "0 30 59 0 40 0 58 0x25"},
            ],
            "alert_rule_test": [{"eval_time": "30m", "alertname": name, "exp_alerts": []}],
        },
    ]
    spec = tmp_path / "tests.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests}))
    done = subprocess.run(
        [find_binary("promtool"), "test", "rules", spec.name], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_deploy_mounts_the_audit_key_from_its_own_secret():
    for path in ("overlays/example", "overlays/fleet"):
        objs = render(path)
        pod = one(objs, "Deployment", "firebreak")["spec"]["template"]["spec"]
        [c] = pod["containers"]
        [env_cm] = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("firebreak-env-")]
        key_file = Path(env_cm["data"]["FIREBREAK_AUDIT_KEY"])
        [mount] = [m for m in c["volumeMounts"] if Path(m["mountPath"]) == key_file.parent]
        assert mount["readOnly"] is True
        [vol] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        secret = vol["secret"]
        assert secret["secretName"] == "firebreak-audit-key" and not secret.get("optional")
        assert [i["path"] for i in secret["items"]] == [key_file.name]
        assert secret["defaultMode"] & 0o077 in (0, 0o040)  # no one but the pod's user and group
        # Its own Secret, apart from Redis's: whoever may read the Redis URL's Secret does not get the key,
        # and the key reaches the pod only as this file.
        refs = [((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") for e in c.get("env") or []] + [
            (v.get("secret") or {}).get("secretName") for v in pod["volumes"] if v is not vol
        ]
        assert "firebreak-redis" in refs or any("redis" in str(e.get("value", "")) for e in c["env"])
        assert "firebreak-audit-key" not in refs
