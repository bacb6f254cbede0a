"""The Slack edge: Bolt listeners, the Web API gateway and Block Kit views."""
