"""`make lab` as a teacher uses it: the command the Makefile runs starts JupyterLab, which opens a chapter's
MyST source as a notebook (jupytext), offers the project's Python as its kernel, and applies the book's
settings (MyST files open as notebooks; no update or news check, which would go to the network)."""

import json
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from identifiability.base import paths
from identifiability.chapters.contract import by_name

TOKEN = "lab-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(base: str, path: str) -> dict:
    req = urllib.request.Request(base + path, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def lab():
    root = paths.source_root()
    venv = Path(sys.executable).parent.parent
    dry = subprocess.run(
        ["make", "-s", "-n", "lab", f"VENV={venv}"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.replace("\\\n", " ")  # the recipe's continued lines
    line = next((x for x in dry.splitlines() if "bin/jupyter lab" in x), None)
    assert line, f"make lab does not run jupyter lab:\n{dry}"
    port = _free_port()
    cmd = shlex.split(line) + [
        "--no-browser",
        f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={TOKEN}",
        "--ServerApp.port_retries=0",
    ]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited: {proc.stderr.read()[-2000:]}")
            try:
                _get(base, "/api/status")
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("jupyter lab did not answer within 60 s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_lab_opens_a_chapter_source_as_a_notebook(lab):
    stem = by_name("token_identity").stem
    nb = _get(lab, f"/api/contents/notebooks/{stem}.md?type=notebook&content=1")
    assert nb["type"] == "notebook"
    cells = nb["content"]["cells"]
    assert sum(c["cell_type"] == "code" for c in cells) > 5
    assert any("parameters" in c["metadata"].get("tags", []) for c in cells), "the parameters cell lost its tag"
    assert nb["content"]["metadata"]["kernelspec"]["name"] == "python3"


def test_lab_kernel_is_the_projects_python(lab):
    specs = _get(lab, "/api/kernelspecs")
    assert specs["default"] == "python3"
    argv0 = specs["kernelspecs"]["python3"]["spec"]["argv"][0]
    # the kernel's Python is the one these tests run in (the project's venv, with the package installed)
    assert argv0 in ("python", sys.executable) or Path(argv0).resolve() == Path(sys.executable).resolve(), argv0


def test_lab_applies_the_books_settings(lab):
    """The overrides (.jupyter/lab/settings/overrides.json) become the defaults JupyterLab's settings serve."""

    def defaults(plugin: str) -> dict:
        props = _get(lab, f"/lab/api/settings/{plugin}")["schema"]["properties"]
        return {k: v.get("default") for k, v in props.items()}

    viewers = defaults("@jupyterlab/docmanager-extension:plugin")["defaultViewers"]
    assert viewers.get("markdown") == "Jupytext Notebook" and viewers.get("myst") == "Jupytext Notebook"
    news = defaults("@jupyterlab/apputils-extension:notification")
    assert news["checkForUpdates"] is False and news["fetchNews"] == "false"
