"""Two-person approval for levers, and time-boxed break-glass grants.

docs/security-model.md: "Two-person approval" and "Break-glass".

A ballot (one Redis hash per request) holds who asked, which seats must
approve, the window and the votes; every vote, expiry, end and revocation is
one Lua script, so the role check, the vote and the decision are one step.
"""
