"""Process configuration from the environment (docs/operating.md: "Configuration").

Settings are built once in the entry point and passed down; nothing reads the
environment at import time.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.policy.models import first_error
from bot.store import target as store_target

DEFAULT_SLACK_API_URL = "https://slack.com/api/"


class ConfigError(Exception):
    """A configuration problem, phrased as one line for the operator."""


# One config for every part of Settings: each integration's model reads its own variables alone too.
_ENV = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")


class SlackSettings(BaseSettings):
    """The Slack integration's settings (bot/chat/port.py's port; SLACK_*)."""

    model_config = _ENV

    # The bot token (xoxb-…): required for `serve`.
    slack_bot_token: SecretStr | None = None
    # Verifies every request Slack sends (v0 HMAC): required for `serve`.
    slack_signing_secret: SecretStr | None = None
    # The app-level token (xapp-…, scope connections:write): set it for Socket Mode.
    slack_app_token: SecretStr | None = None
    # The Web API's base URL.
    slack_api_url: str = DEFAULT_SLACK_API_URL

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, v: str) -> str:
        # slack_sdk joins base_url + method, so the slash matters.
        return v if v.endswith("/") else v + "/"

    def require_slack(self) -> None:
        missing = [
            name
            for name, val in (
                ("SLACK_BOT_TOKEN", self.slack_bot_token),
                ("SLACK_SIGNING_SECRET", self.slack_signing_secret),
            )
            if not val or not val.get_secret_value()
        ]
        if missing:
            raise ConfigError(
                f"missing {', '.join(missing)}: set it in the environment "
                "(or run `firebreak console` to try Firebreak without Slack)"
            )


class KubeSettings(BaseSettings):
    """The Kubernetes integration's settings (bot/clusters.py's port; KUBECONFIG, read as kubectl reads it)."""

    model_config = _ENV

    # One context per cell (named after the cell) plus the fleet context; files joined by `:` are
    # merged as kubectl merges them (docs/operating.md: "Configuration").
    kubeconfig: Path | None = None

    @field_validator("kubeconfig", mode="before")
    @classmethod
    def _kube_unset_if_empty(cls, v: object) -> object:
        return v or None  # KUBECONFIG= (empty) means unset, not the current directory


class PrometheusSettings(BaseSettings):
    """The Prometheus integration's settings (bot/prom's port; PROMETHEUS_*)."""

    model_config = _ENV

    # Prometheus's base URL: route-weight's headroom check (it fails closed without it), triage and
    # `changed`'s demand stream ask it.
    prometheus_url: str | None = None
    # PEM CA bundle that signed Prometheus's certificate. TLS is always verified (when unset,
    # against requests' default bundle), since Prometheus's answer gates route-weight's moves.
    prometheus_ca_file: Path | None = None
    # Credentials for a Prometheus behind auth: a bearer token (or the file that holds it, re-read
    # per query so a rotated token is used), or basic auth; not both.
    prometheus_bearer_token: SecretStr | None = None
    # A file holding the bearer token, read again at each query.
    prometheus_bearer_token_file: Path | None = None
    # Basic auth to Prometheus: the username and the password, both or neither.
    prometheus_username: str | None = None
    # Basic auth's password.
    prometheus_password: SecretStr | None = None
    # Seconds per query when the caller (the policy's timeout_seconds) gives none.
    prometheus_timeout: float = Field(default=5.0, gt=0)

    @field_validator(
        "prometheus_url",
        "prometheus_ca_file",
        "prometheus_bearer_token",
        "prometheus_bearer_token_file",
        "prometheus_username",
        "prometheus_password",
        mode="before",
    )
    @classmethod
    def _prometheus_unset_if_empty(cls, v: object) -> object:
        return v or None  # PROMETHEUS_CA_FILE= (empty) means unset, not the current directory

    @field_validator("prometheus_url")
    @classmethod
    def _prometheus_form(cls, v: str | None) -> str | None:
        if v:
            u = urlsplit(v)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError(f"{v[:80]!r} is not an http:// or https:// URL (e.g. http://prometheus:9090)")
        return v

    @model_validator(mode="after")
    def _prometheus_access(self) -> PrometheusSettings:
        bearer = [
            n
            for n, v in (
                ("PROMETHEUS_BEARER_TOKEN", self.prometheus_bearer_token),
                ("PROMETHEUS_BEARER_TOKEN_FILE", self.prometheus_bearer_token_file),
            )
            if v
        ]
        basic = [
            n
            for n, v in (
                ("PROMETHEUS_USERNAME", self.prometheus_username),
                ("PROMETHEUS_PASSWORD", self.prometheus_password),
            )
            if v
        ]
        given = bearer + basic + (["PROMETHEUS_CA_FILE"] if self.prometheus_ca_file else [])
        if given and not self.prometheus_url:
            raise ValueError(f"{' and '.join(given)} set but PROMETHEUS_URL is not: set it, or unset them")
        if len(bearer) == 2:
            raise ValueError("PROMETHEUS_BEARER_TOKEN and PROMETHEUS_BEARER_TOKEN_FILE are both set: use one")
        if bearer and basic:
            raise ValueError(f"{bearer[0]} and {basic[0]} are both set: use a bearer token or basic auth, not both")
        if len(basic) == 1:
            raise ValueError("basic auth needs both PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD")
        for name, path, what in (
            ("PROMETHEUS_CA_FILE", self.prometheus_ca_file, "a PEM CA bundle"),
            ("PROMETHEUS_BEARER_TOKEN_FILE", self.prometheus_bearer_token_file, "the token"),
        ):
            if path is not None and not (path.is_file() and os.access(path, os.R_OK)):
                raise ValueError(f"{name} {path} is not a readable file ({what})")
        return self


# Each outbound integration's settings are a model of their own (bot/runtime.py INTEGRATIONS), composed
# here by inheritance so every variable keeps its name and every reader its flat ``settings.<name>``.
class Settings(PrometheusSettings, KubeSettings, SlackSettings):
    model_config = _ENV

    # One Redis, Sentinel or Cluster; unset: an in-memory store whose state dies with the process.
    redis_url: str | None = None
    # PEM CA bundle that signed Redis's certificate (rediss://, rediss+sentinel://, rediss+cluster://).
    redis_ca_file: Path | None = None
    # The policy YAML files; unset: ./policies when it holds one, else the packaged defaults.
    firebreak_policy_dir: Path | None = None
    # The bearer token Alertmanager sends to POST /alertmanager; unset: every delivery gets 401.
    alertmanager_token: SecretStr | None = None
    # The channel id public (product × region) updates go to.
    firebreak_stakeholder_channel: str | None = None
    # The channel id for break-glass requests, grants and every pull under a grant.
    firebreak_security_channel: str | None = None
    # PEM Ed25519 private key that signs audit checkpoints (bot/audit/sign.py); unset: the audit
    # is only hash-chained. Its checkpoints are also posted to FIREBREAK_AUDIT_CHANNEL when set.
    firebreak_audit_key: Path | None = None
    # The channel id each signed audit checkpoint is also posted to.
    firebreak_audit_channel: str | None = None
    # The timer loop's longest sleep, in seconds.
    firebreak_scheduler_tick: float = Field(default=0.5, gt=0)
    # Slack user group membership (the seats' eligibility, docs/security-model.md) is kept this long per process
    # (each replica its own copy): a member removed in Slack loses the seat's power within it.
    firebreak_group_cache_seconds: float = Field(default=300.0, gt=0, le=300)
    # How long one eligibility check waits for Slack before failing closed: well inside the 3 s
    # people expect an answer in, with room for the rest of the request.
    firebreak_group_lookup_timeout: float = Field(default=1.5, gt=0, le=2.5)
    # SIGTERM to exit (bot/serve.py): under Kubernetes' default terminationGracePeriodSeconds (30).
    firebreak_shutdown_grace: float = Field(default=25.0, gt=0)
    # After SIGTERM, how long requests still arriving are taken (while the pod leaves the Service's
    # endpoints) before they get a 503. 0 when a preStop hook already waits that out.
    firebreak_shutdown_linger: float = Field(default=5.0, ge=0)

    @field_validator("redis_url")
    @classmethod
    def _redis_form(cls, v: str | None) -> str | None:
        if v:
            try:
                store_target.parse(v)
            except store_target.BadRedisUrl as exc:
                raise ValueError(str(exc)) from None
        return v or None

    @model_validator(mode="after")
    def _redis_ca_needs_tls(self) -> Settings:
        if self.redis_ca_file is None:
            return self
        if not self.redis_url or not store_target.parse(self.redis_url).tls:
            raise ValueError(
                "REDIS_CA_FILE is set but REDIS_URL is not TLS: use rediss:// (or rediss+sentinel://, "
                "rediss+cluster://), or unset REDIS_CA_FILE"
            )
        if not self.redis_ca_file.is_file():
            raise ValueError(f"REDIS_CA_FILE {self.redis_ca_file} is not a readable file (a PEM CA bundle)")
        return self

    @field_validator("redis_ca_file", "firebreak_audit_key", "firebreak_audit_channel", mode="before")
    @classmethod
    def _unset_if_empty(cls, v: object) -> object:
        return v or None  # REDIS_CA_FILE= (empty) means unset, not the current directory


def load_settings(**overrides: object) -> Settings:
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = first_error(exc)
        where = f" {err.field.upper()}" if err.field else ""  # a check across fields names them itself
        raise ConfigError(f"bad configuration{where}: {err.message}") from None
