"""Test support: everything tests share lives here (never in a conftest.py or a test module).

Modules:
  harness        the real app over HTTP against the fakes (RunningApp, start_app), T0, audit_entries
  wait           until(): wait for a condition with a deadline instead of a fixed sleep
  ports          free_port(), safe across xdist workers and concurrent runs
  services       locating (and, on demand, installing) service binaries; process lifecycle
  redis_server, redis_topologies, killed_redis, stall_proxy   real Redis: one, Sentinel, Cluster, killed, stalled
  prometheus     OpenMetrics writer, backfilled PrometheusServer, ttft_scenario builder
  alertmanager   AlertmanagerServer, WebhookReceiver
  core, comms, approvals, levers, lever_fixtures, signals, triage, telemetry, postmortem, mentions,
  deploy, reliability/   each test package's shared steps and fixtures
"""
