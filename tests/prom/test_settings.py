"""Prometheus's settings (bot/config.py): what is refused at start, in one line, and the secrets
kept out of reprs and logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ConfigError, load_settings
from bot.runtime import prometheus
from tests.support.core import run_cli

URL = "http://prometheus:9090"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "token").write_text("token-from-file\n")
    return {"ca": tmp_path / "ca.pem", "token": tmp_path / "token", "missing": tmp_path / "missing.pem"}


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (
            {"prometheus_bearer_token": "t", "prometheus_username": "u", "prometheus_password": "p"},
            "bad configuration: PROMETHEUS_BEARER_TOKEN and PROMETHEUS_USERNAME are both set: "
            "use a bearer token or basic auth, not both",
        ),
        (
            {"prometheus_bearer_token": "t", "prometheus_bearer_token_file": "token"},
            "bad configuration: PROMETHEUS_BEARER_TOKEN and PROMETHEUS_BEARER_TOKEN_FILE are both set: use one",
        ),
        (
            {"prometheus_username": "u"},
            "bad configuration: basic auth needs both PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD",
        ),
        (
            {"prometheus_password": "p"},
            "bad configuration: basic auth needs both PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD",
        ),
        ({"prometheus_ca_file": "missing"}, "is not a readable file (a PEM CA bundle)"),
        ({"prometheus_ca_file": "."}, "is not a readable file (a PEM CA bundle)"),  # a directory
        ({"prometheus_bearer_token_file": "missing"}, "is not a readable file (the token)"),
        ({"prometheus_url": None, "prometheus_ca_file": "ca"}, "PROMETHEUS_CA_FILE set but PROMETHEUS_URL is not"),
        (
            {"prometheus_url": "prometheus:9090"},
            "bad configuration PROMETHEUS_URL: 'prometheus:9090' is not an http:// or https:// URL",
        ),
        ({"prometheus_timeout": 0}, "bad configuration PROMETHEUS_TIMEOUT: "),
    ],
    ids=[
        "bearer-and-basic",
        "token-and-token-file",
        "username-alone",
        "password-alone",
        "missing-ca",
        "ca-is-a-directory",
        "missing-token-file",
        "ca-without-url",
        "url-without-scheme",
        "zero-timeout",
    ],
)
def test_bad_prometheus_settings_are_refused_in_one_line(files, settings, says):
    given = {"prometheus_url": URL, **settings}
    for key in ("prometheus_ca_file", "prometheus_bearer_token_file"):
        if given.get(key) in files:
            given[key] = str(files[given[key]])
        elif given.get(key) == ".":
            given[key] = str(files["ca"].parent)
    with pytest.raises(ConfigError) as e:
        load_settings(**given)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_empty_values_mean_unset():
    s = load_settings(
        prometheus_url="",
        prometheus_ca_file="",
        prometheus_bearer_token="",
        prometheus_bearer_token_file="",
        prometheus_username="",
        prometheus_password="",
    )
    assert prometheus(s) is None


def test_secrets_stay_out_of_reprs(files):
    s = load_settings(prometheus_url=URL, prometheus_username="u", prometheus_password="hunter2-basic")
    t = load_settings(prometheus_url=URL, prometheus_bearer_token="hunter2-bearer")
    for shown in (repr(s), str(s), repr(t), str(t), repr(prometheus(s)), repr(prometheus(t))):
        assert "hunter2" not in shown, shown


def test_serve_refuses_bad_prometheus_settings_in_one_line(files):
    env = {
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
        "PROMETHEUS_URL": URL,
        "PROMETHEUS_BEARER_TOKEN": "hunter2-bearer",
        "PROMETHEUS_USERNAME": "u",
        "PROMETHEUS_PASSWORD": "hunter2-basic",
    }
    out = run_cli("serve", env=env)
    assert out.returncode == 2
    assert out.stderr == (
        "firebreak: bad configuration: PROMETHEUS_BEARER_TOKEN and PROMETHEUS_USERNAME are both set: "
        "use a bearer token or basic auth, not both\n"
    ), out.stderr
    assert "hunter2" not in out.stdout + out.stderr
