"""Test support: real Prometheus / Alertmanager / Redis processes on loopback.

Modules:
  ports         free_port()
  services      locating (and, on demand, installing) service binaries; process lifecycle
  prometheus    OpenMetrics writer, backfilled PrometheusServer, ttft_scenario builder
  alertmanager  AlertmanagerServer, WebhookReceiver
"""
