"""The remediation alarm: GPU nodes in a cell going out of service faster than the policy's rate,
by anyone, or one node going out twice in a short while (DESIGN §4, "Automation is part of the
blast radius"). capability.py shows everything it adds to the app."""
