"""Break-glass reasons and lever targets reach the incident and security channels inert (issue 9, item 1)."""

from __future__ import annotations

from tests.support.approvals import text_of
from tests.support.mentions import pings

INJECT = "<!channel> <!here> <!everyone> <!subteam^S1|@x> <https://evil|click>"
SHOWN = "&lt;!channel&gt; &lt;!here&gt; &lt;!everyone&gt; &lt;!subteam^S1|@x&gt; &lt;https://evil|click&gt;"


def _mark(world) -> tuple[int, int]:
    return len(world.slack.calls), len(world.slack.responses)


async def test_breakglass_reason_is_inert_on_the_card_and_in_the_security_channel(world):
    await world.declare(ops="UOPS")
    calls, replies = _mark(world)
    out = await world.run(f"breakglass kueue-hold 30 ops lead unreachable {INJECT} &amp; more", user="UX")
    assert out.startswith("BG-1 requested"), out
    [post] = [t for t in world.security_posts() if "break-glass requested" in t]
    assert post.endswith(f"Reason: ops lead unreachable {SHOWN} &amp; more")
    [card] = [m for m in world.cards("breakglass.approve") if "BG-1" in (m.get("text") or "")]
    assert f"*Reason*\nops lead unreachable {SHOWN} &amp; more" in text_of(card)
    assert pings(world.slack, calls, replies) == []


async def test_a_grantees_unusable_target_reaches_the_security_channel_inert(world):
    await world.declare(ops="UOPS")
    bid = (await world.run("breakglass kueue-hold 30 ops lead unreachable", user="UX")).split()[0]
    assert "approved" in await world.press("breakglass.approve", bid, user="U_IC")
    calls, replies = _mark(world)
    for target in ("<!channel>", "<https://evil|click>", "<!subteam^S1|@x>"):
        out = await world.run(f"lever kueue-hold {target} --cell us-east-3", user="UX")
        assert "nothing changed" in out, out
    used = [t for t in world.security_posts() if f"{bid} used" in t]
    assert len(used) == 3, used
    assert "kueue-hold &lt;!channel&gt; (us-east-3)" in used[0]
    assert "kueue-hold &lt;https://evil|click&gt; (us-east-3)" in used[1]
    assert "kueue-hold &lt;!subteam^S1|@x&gt; (us-east-3)" in used[2]
    assert pings(world.slack, calls, replies) == []
    assert world.patches() == []
