"""`changed`'s Warning events: one line per object and reason (several Event objects of one pod and
reason, as the event recorder keeps them apart per message, counted together), with how many, when
first and last seen and the latest message; the most frequent first, at most `changed.max_items`
lines (policies/queries.yaml), then one line for the rest by reason. Against a fake cell
(world/fbworld/kube) through the real app; no Prometheus (the demand stream says so)."""

from __future__ import annotations

import pytest

from tests.support.harness import T0
from tests.support.triage import HEALTHY, SHIPPED, block_texts, event, posted, say


@pytest.fixture
def app_settings() -> dict:
    return {"firebreak_policy_dir": str(SHIPPED)}  # changed.max_items: 5


def warning_lines(app, channel: str) -> list[str]:
    text = "\n".join(block_texts(posted(app, channel, "What changed")))
    lines = text.split("\n")
    start = lines.index("• *Warning events*:") + 1
    out = []
    for line in lines[start:]:
        if not line.startswith("    ◦ "):
            break
        out.append(line.removeprefix("    ◦ "))
    return out


async def test_warning_events_are_one_line_per_object_and_reason_capped_with_the_rest_counted(app, cells):
    c = cells.healthy
    # One pod, one reason, three Event objects (the recorder keeps one per message): one line.
    c.put(event("a.1", "BackOff", T0 - 1800, obj="trainer-0", count=4, message="Back-off restarting (exit 1)"))
    c.put(event("a.2", "BackOff", T0 - 900, obj="trainer-0", count=5, message="Back-off restarting (exit 137)"))
    c.put(event("a.3", "BackOff", T0 - 300, obj="trainer-0", count=1, message="Back-off restarting (exit 139)"))
    # The same reason on another pod is its own line.
    c.put(event("b.1", "BackOff", T0 - 600, obj="trainer-1", count=2))
    # A storm: one reason on eight pods, fewer each than trainer-0's BackOff.
    for i in range(8):
        c.put(event(f"u.{i}", "Unhealthy", T0 - 120, obj=f"vllm-{i}", count=3, message="Readiness probe failed"))
    c.put(event("n.1", "NodeNotReady", T0 - 60, kind="Node", obj="gpu-a3-0007", count=1))
    inc = await app.declare(cells=(HEALTHY,))
    await say(app, "changed", "U_ANYONE", inc.channel_id)
    lines = warning_lines(app, inc.channel_id)
    # T0 is 03:10 UTC; each event's firstTimestamp is a minute before its lastTimestamp (tests/support/triage.py).
    assert (
        lines[0]
        == "BackOff ×10 on Pod serve-chat/trainer-0, first 02:39, last 03:05 UTC: Back-off restarting (exit 139)"
    )
    assert lines[1] == "Unhealthy ×3 on Pod serve-chat/vllm-0, first 03:07, last 03:08 UTC: Readiness probe failed"
    assert len(lines) == 6, lines  # 5 (changed.max_items) and the rest
    assert lines[-1] == (
        "… and 6 more: Unhealthy ×12 on 4 objects; BackOff ×2 on 1 object; NodeNotReady ×1 on 1 object"
    )


async def test_a_mention_in_an_event_message_pings_nobody(app, cells):
    """Whoever can create an Event in a cell writes its message; `changed` shows it as text, so a
    `<@U…>` or `<!channel>` in it pings nobody (cluster data is made inert, not quoted as a person's)."""
    cells.healthy.put(event("p.1", "BackOff", T0 - 60, obj="trainer-0", message="ask <@U0VICTIM> or <!channel>"))
    inc = await app.declare(cells=(HEALTHY,))
    await say(app, "changed", "U_ANYONE", inc.channel_id)
    text = "\n".join(block_texts(posted(app, inc.channel_id, "What changed")))
    assert "ask &lt;@U0VICTIM&gt; or &lt;!channel&gt;" in text, text
    assert "<@U0VICTIM>" not in text and "<!channel>" not in text, text
