"""The viewer's server and static export: loopback only, read-only, no path outside the served runs; the ``view`` command."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from ecgtrace.cli import main
from ecgtrace.views.run_view import open_run, sample_key
from ecgtrace.views.viewer_server import ViewerServer
from ecgtrace.views.viewer_site import APP_FILES, CSP, ViewerSite
from ecgtrace.views.viewer_static import MARKER, export_static
from tests.views.conftest import folder_state

ROOT = Path(__file__).resolve().parents[2]


def _get(server: ViewerServer, path: str, *, method: str = "GET", host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{server.port}")
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


@pytest.fixture()
def image_run(viewer_runs: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """A copy of run A whose items show an image; item 1's image is a symlink to a file outside both folders."""
    from PIL import Image

    base = tmp_path / "copy"
    shutil.copytree(viewer_runs["a"].parent / "dataset", base / "dataset")
    shutil.copytree(viewer_runs["a"], base / "run")
    secret = tmp_path / "secret.png"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(secret)
    rows = [json.loads(line) for line in (base / "dataset" / "audit.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        row["assets"]["image"] = f"assets/{row['id']}.png"
        target = base / "dataset" / row["assets"]["image"]
        if i == 1:
            os.symlink(secret, target)
        else:
            Image.new("RGB", (20, 10), (255, 243, 243)).save(target)
    (base / "dataset" / "audit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    header = json.loads((base / "run" / "header.json").read_text())
    header["settings"]["dataset_path"] = str(base / "dataset" / "audit.jsonl")
    (base / "run" / "header.json").write_text(json.dumps(header))
    return {"run": base / "run", "dataset": base / "dataset", "ids": [r["id"] for r in rows], "secret": secret}


def test_server_binds_loopback_serves_the_app_with_a_strict_csp_and_refuses_the_rest(image_run: dict[str, Path]) -> None:
    site = ViewerSite([open_run(image_run["run"])])
    server = ViewerServer(site).start()
    before = folder_state(image_run["run"], image_run["dataset"])
    try:
        assert server.server_address[0] == "127.0.0.1" and server.url == f"http://127.0.0.1:{server.port}/"
        status, headers, body = _get(server, "/")
        assert status == 200 and headers["Content-Security-Policy"] == CSP and b"app/core.js" in body
        assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP and headers["X-Content-Type-Options"] == "nosniff"
        for name in APP_FILES[1:]:
            assert _get(server, f"/app/{name}")[0] == 200
        status, _, body = _get(server, "/data/app.js")
        assert status == 200 and body.startswith(b'ECGV.receive("app",')
        ok_key, link_key = sample_key(image_run["ids"][0]), sample_key(image_run["ids"][1])
        status, headers, body = _get(server, f"/data/r0/asset/{ok_key}/img0.png")
        assert status == 200 and headers["Content-Type"] == "image/png" and body == (image_run["dataset"] / "assets" / f"{image_run['ids'][0]}.png").read_bytes()
        assert _get(server, f"/data/r0/asset/{link_key}/img0.png")[0] == 404  # a symlink out of the dataset folder
        status, headers, body = _get(server, f"/data/r0/fig/{ok_key}/window.png")
        assert status == 200 and body.startswith(b"\x89PNG")
        for path in ("/data/../header.json", "/app/../../../../etc/passwd", "/data/r0/../../header.json", "/header.json",
                     "/data/r0/samples.jsonl", "/data/r7/overview.js", f"/data/r0/s/{ok_key}x.js", "/app/%2e%2e/%2e%2e/pyproject.toml",
                     "/data/r0/asset/" + ok_key + "/img0.jpg", "/data/cmp/0-0.js", "/favicon.ico"):
            assert _get(server, path)[0] == 404, path
        assert _get(server, "/", host="evil.example:80")[0] == 403  # DNS rebinding: only our own host name
        assert _get(server, "/", method="POST")[0] == 405 and _get(server, "/", method="PUT")[0] == 405
        assert _get(server, "/", method="HEAD")[0] == 200
    finally:
        server.stop()
    assert folder_state(image_run["run"], image_run["dataset"]) == before  # nothing was written


def test_static_export_writes_the_same_app_and_never_into_a_run_folder(viewer_runs: dict[str, Path], tmp_path: Path) -> None:
    site = ViewerSite([open_run(viewer_runs["a"]), open_run(viewer_runs["b"])])
    before = folder_state(viewer_runs["a"], viewer_runs["b"], viewer_runs["dataset"].parent)
    out = tmp_path / "share"
    summary = export_static(site, out, max_images=2)
    assert summary["samples"] == 12 and summary["figures"] == 2 and summary["figures_left_out"] > 0
    assert (out / "index.html").read_bytes() == (ROOT / "ecgtrace" / "views" / "viewer_app" / "index.html").read_bytes()
    assert all((out / "app" / name).is_file() for name in APP_FILES[1:]) and (out / MARKER).is_file()
    for name in ("app", "r0/overview", "r0/index", "r0/text", "r1/index", "cmp/0-1"):
        assert (out / "data" / f"{name}.js").read_bytes() == site.data(name), name
    keys = {sample_key(r["id"]) for r in site.runs[0].rows}
    assert {p.stem for p in (out / "data" / "r0" / "s").iterdir()} == keys
    figures = sorted(out.rglob("*.png"))
    assert len(figures) == 2 and all(p.name == "window.png" for p in figures)  # every sample's window comes first
    detail = (out / "data" / "r0" / "s" / f"{sample_key(site.runs[0].rows[5]['id'])}.js").read_text()
    assert '"figures":[]' in detail and '"figures_not_exported":3' in detail
    again = export_static(site, out, max_images=0)  # an earlier export is replaced whole
    assert again["figures"] == 0 and not list(out.rglob("*.png"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".share.")]  # no partial folder left behind
    assert folder_state(viewer_runs["a"], viewer_runs["b"], viewer_runs["dataset"].parent) == before


@pytest.mark.parametrize("where", ["inside the run", "inside the dataset", "not empty"])
def test_static_export_refuses_a_folder_it_must_not_write(viewer_runs: dict[str, Path], tmp_path: Path, where: str, capsys) -> None:  # noqa: ANN001
    out = {"inside the run": viewer_runs["a"] / "viewer", "inside the dataset": viewer_runs["dataset"].parent / "viewer",
           "not empty": tmp_path / "full"}[where]
    if where == "not empty":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    assert main(["view", str(viewer_runs["a"]), "--static", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "--static" in err and len(err.strip().splitlines()) <= 2
    assert not (out / "index.html").exists()


def test_view_command_static_and_bad_input(viewer_runs: dict[str, Path], tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert main(["view", str(viewer_runs["a"]), str(viewer_runs["b"]), "--static", str(tmp_path / "v"), "--max-images", "1"]) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "v" / "data" / "cmp" / "0-1.js").is_file()
    assert main(["view", str(tmp_path)]) == 2
    assert "error:" in capsys.readouterr().err
    assert main(["view", str(viewer_runs["a"]), "--port", "70000"]) == 2
    import socket

    with socket.socket() as busy:  # a port someone else holds: one error line naming it, no traceback
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        capsys.readouterr()
        assert main(["view", str(viewer_runs["a"]), "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err


def _sigint_as_in_a_terminal() -> None:
    """Child pre-exec: Ctrl-C at its default. A test run started in the background of a non-interactive shell
    (``pytest &``) ignores SIGINT, and an ignored signal is inherited: the viewer would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_view_command_serves_on_a_free_port_until_interrupted(viewer_runs: dict[str, Path]) -> None:
    """The real command in its own process: it prints the URL, answers on it, and stops cleanly on Ctrl-C."""
    proc = subprocess.Popen([sys.executable, "-m", "ecgtrace.cli", "view", str(viewer_runs["a"]), str(viewer_runs["qa"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}, preexec_fn=_sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while "viewer at" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line and proc.poll() is not None:
                break
        assert "viewer at http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.stderr else "")
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/data/app.js")
        body = conn.getresponse().read()
        assert b'"runs":' in body and b"scripted-a" in body
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "viewer stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_app_ships_as_package_data_and_uses_no_network() -> None:
    """Every app file is covered by pyproject's package data (so wheels carry it) and names no remote resource."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "ecgtrace.views.viewer_app" in config["packages"]
    patterns = config["package-data"]["ecgtrace.views.viewer_app"]
    folder = ROOT / "ecgtrace" / "views" / "viewer_app"
    shipped = {p.name for p in folder.iterdir() if any(p.match(pattern) for pattern in patterns)}
    assert set(APP_FILES) <= shipped and {p.name for p in folder.iterdir() if p.is_file()} == shipped
    for name in APP_FILES:
        text = (folder / name).read_text(encoding="utf-8")
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, name
        sinks = re.findall(r"\.(?:inner|outer)HTML\s*=|insertAdjacentHTML\(|document\.write|\beval\(|new Function\(|DOMParser", text)
        assert not sinks, (name, sinks)  # the DOM is built with createElement and textContent only
