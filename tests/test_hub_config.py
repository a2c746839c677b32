"""JupyterHub mode, without a hub: the jupyterhub_config.py helper, the YAML settings file,
the command line, and a service that refuses to start outside a hub."""

from __future__ import annotations

import subprocess
import sys

from traitlets.config import Config

from jupyter_gpusched.hub import configure_hub
from jupyter_gpusched.hub.app import yaml_config


def test_configure_hub_registers_the_service_and_its_scopes():
    c = Config()
    url = configure_hub(c, port=10123, config_file="/etc/gpusched.py", args=["--GPUSched.local_gpus=2"])
    assert url == "http://127.0.0.1:10123/services/gpusched/"
    [service] = c.JupyterHub.services
    assert service["name"] == "gpusched" and service["url"] == "http://127.0.0.1:10123"
    assert service["command"][1:] == [
        "-m",
        "jupyter_gpusched.hub",
        "--config=/etc/gpusched.py",
        "--GPUSched.local_gpus=2",
    ]
    assert c.JupyterHub.load_roles == [
        {"name": "gpusched-service", "scopes": ["read:servers"], "services": ["gpusched"]},  # hub/orphans.py
        {"name": "user", "scopes": ["self", "access:services!service=gpusched"]},
    ]
    assert "access:services!service=gpusched" in c.Spawner.server_token_scopes
    assert "access:servers!server" in c.Spawner.server_token_scopes
    assert c.Spawner.environment == {"GPUSCHED_HUB_SERVICE_URL": url}


def test_configure_hub_keeps_existing_settings():
    c = Config()
    c.JupyterHub.services = [{"name": "other", "url": "http://127.0.0.1:9"}]
    c.JupyterHub.load_roles = [{"name": "user", "scopes": ["self", "read:groups"]}, {"name": "ops", "users": ["x"]}]
    c.Spawner.environment = {"A": "1"}
    c.Spawner.server_token_scopes = ["users:activity!user"]
    configure_hub(c, name="gs", port=1, api_token="secret")
    assert [s["name"] for s in c.JupyterHub.services] == ["other", "gs"]
    assert c.JupyterHub.services[1]["api_token"] == "secret" and "command" not in c.JupyterHub.services[1]
    assert c.JupyterHub.load_roles[0]["scopes"] == ["self", "read:groups", "access:services!service=gs"]
    assert c.JupyterHub.load_roles[1] == {"name": "ops", "users": ["x"]}
    assert c.Spawner.environment == {"A": "1", "GPUSCHED_HUB_SERVICE_URL": "http://127.0.0.1:1/services/gs/"}
    assert c.Spawner.server_token_scopes == ["users:activity!user", "access:services!service=gs"]
    configure_hub(c, name="gs", port=1, api_token="secret")  # twice: no duplicates
    assert [s["name"] for s in c.JupyterHub.services] == ["other", "gs"]
    assert c.JupyterHub.load_roles[0]["scopes"].count("access:services!service=gs") == 1
    assert [r["name"] for r in c.JupyterHub.load_roles] == ["user", "ops", "gs-service"]


def test_yaml_settings(tmp_path):
    path = tmp_path / "gpusched.yaml"
    path.write_text(
        "policy: dynamic\n"
        "tenants: {vision: {quota: 2}, nlp: {quota: 2, burst: 2}}\n"
        "group_tenants: {cv-team: vision}\n"
        "ServerApp: {port: 10200}\n"
    )
    config = yaml_config(path)
    assert config.GPUSched.policy == "dynamic" and config.GPUSched.group_tenants == {"cv-team": "vision"}
    assert config.GPUSched.tenants["nlp"] == {"quota": 2, "burst": 2}
    assert config.ServerApp.port == 10200


def test_the_service_needs_a_hub(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_gpusched.cli",
            "hub-service",
            f"--GPUSched.data_dir={tmp_path}",
            "--ServerApp.allow_root=True",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "JUPYTERHUB_API_TOKEN" in proc.stderr
