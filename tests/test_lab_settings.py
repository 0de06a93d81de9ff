"""tools/lab_settings.py: the JupyterLab settings that ``make lab`` installs for a workshop."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import jsonschema
import pytest

from tests.helpers import ROOT
from tools import lab_settings

SCHEMAS = lab_settings.settings_dir(sys.prefix).parent / "schemas"


def test_every_override_is_a_valid_setting_of_the_installed_jupyterlab():
    overrides = lab_settings.course_overrides()
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    for plugin, values in overrides.items():
        package, name = plugin.split(":")
        schema_file = SCHEMAS / package / f"{name}.json"
        assert schema_file.exists(), f"no JupyterLab plugin {plugin} ({schema_file})"
        properties = json.loads(schema_file.read_text(encoding="utf-8"))["properties"]
        for key, value in values.items():
            assert key in properties, f"{plugin} has no setting {key!r}"
            jsonschema.validate(value, properties[key])


def test_install_merges_keeps_other_settings_and_checks(tmp_path, capsys):
    target = lab_settings.settings_dir(tmp_path) / "overrides.json"
    assert lab_settings.main(["--prefix", str(tmp_path), "--check"]) == 1
    target.parent.mkdir(parents=True)
    other = {"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}
    mine = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "true", "x": 1}}
    target.write_text(json.dumps({**other, **mine}))
    assert lab_settings.main(["--prefix", str(tmp_path)]) == 0
    installed = json.loads(target.read_text())
    assert (
        installed["@jupyterlab/apputils-extension:themes"]
        == other["@jupyterlab/apputils-extension:themes"]
    )
    notification = installed["@jupyterlab/apputils-extension:notification"]
    assert notification["fetchNews"] == "false" and notification["x"] == 1  # ours win, theirs stay
    assert lab_settings.main(["--prefix", str(tmp_path), "--check"]) == 0
    before = target.read_text()
    lab_settings.install(tmp_path)
    assert target.read_text() == before  # idempotent
    target.write_text("{not json")
    with pytest.raises(SystemExit, match="not valid JSON"):
        lab_settings.install(tmp_path)
    capsys.readouterr()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_running_jupyterlab_serves_the_course_defaults(tmp_path):
    """Start JupyterLab with the installed overrides and ask its settings API, as the
    browser does: the defaults it serves for those settings are the course's (overrides
    replace a schema's defaults; the user's own settings, empty here, would still win)."""
    lab_settings.install(tmp_path)
    port, token = _free_port(), "dtf-test-token"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1"]
    cmd += [f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}"]
    cmd += [f"--LabApp.app_settings_dir={lab_settings.settings_dir(tmp_path)}"]
    cmd += [f"--LabApp.user_settings_dir={tmp_path / 'user'}"]
    cmd += [f"--LabApp.workspaces_dir={tmp_path / 'ws'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        cmd += ["--allow-root"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}/lab/api/settings"

    def defaults(plugin: str) -> dict:
        request = urllib.request.Request(
            f"{base}/{plugin}", headers={"Authorization": f"token {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            properties = json.load(reply)["schema"]["properties"]
        return {key: value.get("default") for key, value in properties.items()}

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                notification = defaults("@jupyterlab/apputils-extension:notification")
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()[-2000:]
                assert time.monotonic() < deadline, "JupyterLab did not answer within 90 s"
                time.sleep(0.5)
        assert notification["fetchNews"] == "false" and notification["checkForUpdates"] is False
        viewers = defaults("@jupyterlab/docmanager-extension:plugin")["defaultViewers"]
        assert viewers == {"markdown": "Markdown Preview"}
        assert defaults("@jupyterlab/extensionmanager-extension:plugin")["enabled"] is False
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
