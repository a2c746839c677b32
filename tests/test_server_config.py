"""The extension's configuration model: the backend class and its shortcuts, and the deprecated
c.GPUSched.k8s_* names turned into c.KubernetesBackend.* (checked on the Config produced; no cluster)."""

from __future__ import annotations

import logging

import pytest
from traitlets import TraitError
from traitlets.config import Config

from jupyter_gpusched.backends.local import LocalBackend
from jupyter_gpusched.server.app import GPUSched


def app(**sections) -> GPUSched:
    gpusched = GPUSched(config=Config(sections))
    gpusched.log = logging.getLogger("test_server_config")
    return gpusched


def test_the_backend_shortcut_names_a_class_and_backend_class_wins():
    from jupyter_gpusched.backends.kubernetes import KubernetesBackend

    assert app().chosen_backend_class() is LocalBackend
    assert app(GPUSched={"backend": "kubernetes"}).chosen_backend_class() is KubernetesBackend

    class MyBackend(LocalBackend):
        pass

    chosen = app(GPUSched={"backend": "kubernetes", "backend_class": MyBackend}).chosen_backend_class()
    assert chosen is MyBackend
    by_name = app(GPUSched={"backend_class": "jupyter_gpusched.backends.local.LocalBackend"})
    assert by_name.chosen_backend_class() is LocalBackend
    with pytest.raises(TraitError):
        GPUSched(backend_class=dict)
    with pytest.raises(ValueError, match="'local' or 'kubernetes'"):
        GPUSched(backend="slurm")


def test_local_gpus_is_the_shortcut_for_the_local_backends_virtual_gpus():
    assert app(GPUSched={"local_gpus": 2}).backend_shortcuts().LocalBackend.virtual_gpus == 2
    own = app(GPUSched={"local_gpus": 2}, LocalBackend={"virtual_gpus": 6}).backend_shortcuts()
    assert "virtual_gpus" not in own.LocalBackend  # the backend's own setting wins
    built = app(GPUSched={"local_gpus": 3}).make_backend()
    assert isinstance(built, LocalBackend) and built.virtual_gpus == 3


def test_max_log_bytes_is_the_shortcut_for_both_backends_log_caps():
    shortcuts = app(GPUSched={"max_log_bytes": 4096}).backend_shortcuts()
    assert shortcuts.LocalBackend.max_log_bytes == shortcuts.KubernetesBackend.max_log_bytes == 4096
    own = app(GPUSched={"max_log_bytes": 4096}, LocalBackend={"max_log_bytes": 10}).backend_shortcuts()
    assert "max_log_bytes" not in own.LocalBackend and own.KubernetesBackend.max_log_bytes == 4096
    built = app(GPUSched={"max_log_bytes": 8192}).make_backend()
    assert isinstance(built, LocalBackend) and built.max_log_bytes == 8192


def test_deprecated_k8s_settings_become_kubernetes_backend_settings_with_a_warning(caplog):
    gpusched = app(
        GPUSched={
            "k8s_namespace": "jobs",
            "k8s_image": "reg/old:1",
            "k8s_ttl_after_finished": -1,
            "pools": {"cheap": {"spot": True}, "big": {}},
        },
        KubernetesBackend={"image": "reg/new:2"},
    )
    with caplog.at_level(logging.WARNING, logger="test_server_config"):
        k8s = gpusched.backend_shortcuts().KubernetesBackend
    assert k8s == {"namespace": "jobs", "ttl_after_finished": -1, "spot_pools": ["cheap"]}  # image: set there already
    warned = sorted(r.getMessage() for r in caplog.records)
    assert warned == [
        "c.GPUSched.k8s_image is deprecated: use c.KubernetesBackend.image",
        "c.GPUSched.k8s_namespace is deprecated: use c.KubernetesBackend.namespace",
        "c.GPUSched.k8s_ttl_after_finished is deprecated: use c.KubernetesBackend.ttl_after_finished",
    ]


def test_nothing_is_deprecated_when_nothing_old_is_set(caplog):
    with caplog.at_level(logging.WARNING, logger="test_server_config"):
        k8s = app(
            KubernetesBackend={"spot_pools": ["s"]}, GPUSched={"pools": {"p": {"spot": True}}}
        ).backend_shortcuts()
    assert "spot_pools" not in k8s.KubernetesBackend and not caplog.records  # its own spot_pools win


def test_shortcuts_reach_the_backend_through_the_apps_config():
    gpusched = app(GPUSched={"local_gpus": 5, "k8s_namespace": "jobs"}, KubernetesBackend={"image": "reg/new:2"})
    config = gpusched.apply_backend_shortcuts()
    assert config is gpusched.config and config.LocalBackend.virtual_gpus == 5
    assert config.KubernetesBackend.namespace == "jobs" and config.KubernetesBackend.image == "reg/new:2"
    assert gpusched.policy == "dynamic"  # the app's own settings are untouched


def test_the_installed_extension_reads_its_hub_settings_from_c_gpusched(monkeypatch):
    from jupyter_gpusched import _jupyter_server_extension_points
    from jupyter_gpusched.hub.extension import HubAwareGPUSched

    monkeypatch.delenv("GPUSCHED_HUB_SERVICE_URL", raising=False)
    (point,) = _jupyter_server_extension_points()
    assert point["app"] is HubAwareGPUSched and issubclass(HubAwareGPUSched, GPUSched)
    hub_aware = HubAwareGPUSched(config=Config({"GPUSched": {"hub_service_url": "http://svc/", "local_gpus": 3}}))
    assert hub_aware.forwards and hub_aware.local_gpus == 3
    assert not HubAwareGPUSched(
        config=Config({"GPUSched": {"multi_user": True, "hub_service_url": "http://svc/"}})
    ).forwards
    assert not HubAwareGPUSched().forwards


def test_oversize_grant_after_reaches_the_scheduler(tmp_path):
    """Rule 7's grant (docs/scheduling.md): a day by default, None turns it off."""
    backend = app(GPUSched={"local_gpus": 1}).make_backend()
    assert app().service_config(backend).scheduling.oversize_grant_after == 86_400.0
    assert app(GPUSched={"oversize_grant_after": None}).service_config(backend).scheduling.oversize_grant_after is None
    assert (
        app(GPUSched={"oversize_grant_after": 3600.0}).service_config(backend).scheduling.oversize_grant_after == 3600.0
    )
    with pytest.raises(TraitError, match="oversize_grant_after"):
        app(GPUSched={"oversize_grant_after": -1.0})
