"""What levers/kube.py relies on inside kubernetes_asyncio's kubeconfig loader beyond its public
functions, checked against the installed version. The public load_kube_config* do the blocking
parts (token and certificate files) on the event loop, give no expiry for a certificate from an
exec plugin and accept a plugin answer with neither token nor certificate, so levers/kube.py drives
the loader's steps itself. pyproject.toml caps kubernetes-asyncio below the next major release;
before raising the cap, run this file: a failure names the internal that moved."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config.dateutil import parse_rfc3339
from kubernetes_asyncio.config.exec_provider import ExecProvider
from kubernetes_asyncio.config.kube_config import FileOrData, KubeConfigLoader

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _doc(user: dict[str, Any], server: str = "https://10.0.0.1:6443") -> dict[str, Any]:
    ca = base64.b64encode(PEM.encode()).decode()
    return {
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }


def _loader(user: dict[str, Any], base: Path, server: str = "https://10.0.0.1:6443") -> KubeConfigLoader:
    return KubeConfigLoader(config_dict=_doc(user, server), active_context="ctx", config_base_path=str(base))


def test_the_loader_exposes_the_context_s_user_and_its_settings(tmp_path: Path) -> None:
    assert list(inspect.signature(KubeConfigLoader).parameters)[:4] == [
        "config_dict",
        "active_context",
        "get_google_credentials",
        "config_base_path",
    ]
    loader = _loader({"exec": {"command": "x", "apiVersion": "v1"}}, tmp_path)
    assert loader._user is not None and "exec" in loader._user and loader._user["exec"]["command"] == "x"
    assert loader.provider is None
    assert loader._get_base_path(None) == str(tmp_path)
    assert loader._temp_file_path is None
    assert inspect.iscoroutinefunction(loader._load_authentication)
    gcp = _loader({"auth-provider": {"name": "gcp"}}, tmp_path)
    assert gcp.provider == "gcp"
    assert _loader({}, tmp_path)._user is not None  # an empty user stanza is still a user


def test_token_file_then_basic_auth_then_cluster_info_land_in_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret")
    loader = _loader({"tokenFile": "token"}, tmp_path)  # relative to the kubeconfig's directory
    assert loader._load_user_token() is True
    assert loader.token == "Bearer s3cret"
    basic = _loader({"username": "a", "password": "b"}, tmp_path)
    assert basic._load_user_token() is False
    assert basic._load_user_pass_token() is True
    assert basic.token == "Basic " + base64.b64encode(b"a:b").decode()

    loader._load_cluster_info()
    cfg = type.__call__(Configuration)
    assert cfg is not Configuration.get_default_copy()
    loader._set_config(cfg)
    assert cfg.host == "https://10.0.0.1:6443"
    assert cfg.api_key["BearerToken"] == "Bearer s3cret"
    assert Path(cfg.ssl_ca_cert).read_text() == PEM  # *-data went to a temp file


def test_a_client_certificate_set_before_cluster_info_is_kept(tmp_path: Path) -> None:
    """_take_exec_status sets cert_file/key_file from the plugin; _load_cluster_info must not replace them."""
    loader = _loader({}, tmp_path)
    status = {"clientCertificateData": PEM, "clientKeyData": "KEY"}
    made = FileOrData(
        status,
        None,
        data_key_name="clientCertificateData",
        file_base_path=loader._get_base_path(None),
        base64_file_content=False,
        temp_file_path=loader._temp_file_path,
    ).as_file()
    assert made is not None and Path(made).read_text() == PEM  # as the plugin sent it, not base64-decoded
    loader.cert_file, loader.key_file = made, "/key"
    loader._load_cluster_info()
    cfg = type.__call__(Configuration)
    loader._set_config(cfg)
    assert (cfg.cert_file, cfg.key_file) == (made, "/key")


async def test_the_exec_provider_runs_the_plugin_and_returns_its_status(tmp_path: Path) -> None:
    answer = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "t"}}
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"import json, os\nassert 'KUBERNETES_EXEC_INFO' in os.environ\nprint(json.dumps({answer!r}))\n")
    loader = _loader(
        {"exec": {"command": sys.executable, "args": [str(plugin)], "apiVersion": answer["apiVersion"]}}, tmp_path
    )
    assert loader._user is not None
    status = await asyncio.wait_for(ExecProvider(loader._user["exec"]).run(), 30)
    assert status == {"token": "t"}
    assert json.dumps(status)  # a plain mapping, as _take_exec_status reads it
    assert parse_rfc3339("2026-11-30T03:10:00Z") == datetime(2026, 11, 30, 3, 10, tzinfo=UTC)
