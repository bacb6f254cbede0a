"""The remediation alarm: GPU nodes in a cell taken out of service for remediation or as unhealthy
faster than the policy's rate (a count an hour, or a share of the cell's GPU nodes), or one node going
out twice in a short while (docs/operating.md, "The remediation alarm"). capability.py shows everything
it adds to the app."""
