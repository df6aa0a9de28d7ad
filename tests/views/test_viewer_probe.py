"""A probe run given to the viewer is refused with one error line (its pairs are in report.html), never shown as empty rows."""

from __future__ import annotations

import pytest


def test_the_viewer_refuses_a_probe_run_and_points_to_its_report(tmp_path, capsys) -> None:
    from ecgtrace.cli import main
    from ecgtrace.jsonio import write_json_atomic
    from ecgtrace.runlog import RESULTS, RunDir

    run = RunDir.open(tmp_path / "probe-run", {"kind": "probe", "model": "oracle"}, kind="probe")
    write_json_atomic(run.path / RESULTS, {"kind": "probe", "n_items": 0, "n_finished": 0, "overall": {}})
    assert main(["view", str(run.path), "--static", str(tmp_path / "site")]) != 0
    err = capsys.readouterr().err
    assert "error:" in err and "is a probe run" in err and "report.html" in err and "Traceback" not in err
    assert not (tmp_path / "site").exists()

    from ecgtrace.errors import RunError
    from ecgtrace.views.run_view import open_run
    from ecgtrace.views.viewer_site import ViewerSite

    with pytest.raises(RunError, match="probe run"):
        ViewerSite([open_run(run.path)])
