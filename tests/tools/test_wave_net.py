"""The wave net on numpy: its convolution against scipy, a hand-built network against hand-computed values, the
shipped ensemble's provenance (trained on the tuning half only) and its probabilities on the synthetic record's truth."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from scipy.signal import correlate

from ecgtrace.errors import EcgTraceError
from ecgtrace.tools import _wave_net
from ecgtrace.tools._wave_net import (CLASSES, MIN_SCALE_MV, MODEL_PATH, WAVE_NET_FS_HZ, _conv, forward, load_wave_net, net_signal,
                                      normalize_lead, wave_probabilities)


def test_conv_is_a_same_cross_correlation_summed_over_input_channels() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 40)).astype(np.float32)
    w = rng.standard_normal((4, 3, 5)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = _conv(x, w, b, relu=False)
    expected = np.stack([np.stack([sum(correlate(x[n, c], w[o, c], mode="same") for c in range(3)) + b[o] for o in range(4)]) for n in range(2)])
    assert got.shape == (2, 4, 40)
    assert np.allclose(got, expected, atol=1e-4)
    assert np.allclose(_conv(x, w, b), np.maximum(expected, 0.0), atol=1e-4)


def _identity(n_out: int, n_in: int, k: int = 3, pick: int = 0, gain: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    w = np.zeros((n_out, n_in, k), dtype=np.float32)
    w[:, pick, k // 2] = gain
    return w, np.zeros(n_out, dtype=np.float32)


def test_forward_of_a_hand_built_depth_one_net() -> None:
    """Every conv passes channel 0 through; the decoder adds the upsampled pooled signal to the skip.

    Input [1, 3, 2, 0]: pooled [3, 2] -> upsampled [3, 3, 2, 2]; the decoder sees channels [up, skip] and its
    first conv sums them (weights 1 on both), so the output is [4, 6, 4, 2]; the 1x1 output conv scales class 2 by 2.
    """
    net: dict[str, np.ndarray] = {}
    for name, n_in in (("enc0a", 1), ("enc0b", 1), ("mida", 1), ("midb", 1), ("dec0b", 1)):
        net[f"{name}.w"], net[f"{name}.b"] = _identity(1, n_in)
    w, b = _identity(1, 2)
    w[0, 1, 1] = 1.0
    net["dec0a.w"], net["dec0a.b"] = w, b
    net["out.w"] = np.array([[[0.0]], [[0.0]], [[2.0]], [[0.0]]], dtype=np.float32)
    net["out.b"] = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    out = forward(net, 1, np.array([[[1.0, 3.0, 2.0, 0.0]]], dtype=np.float32))
    assert np.allclose(out[0, 2], [8.0, 12.0, 8.0, 4.0])
    assert np.allclose(out[0, 1], 1.0) and np.allclose(out[0, 0], 0.0)


def test_normalize_lead_keeps_a_flat_lead_flat() -> None:
    flat = np.full(500, 0.3)
    assert np.allclose(normalize_lead(flat), 0.0)
    tiny = 0.001 * np.sin(np.linspace(0, 20, 500))
    assert np.abs(normalize_lead(tiny)).max() <= 2 * 0.001 / MIN_SCALE_MV  # a deviation <= 2 uV scaled as if 0.05 mV, not blown up to 1
    x = np.r_[np.zeros(400), np.ones(100)]
    assert np.isclose(np.percentile(np.abs(normalize_lead(x)), 99.0), 1.0)


def test_net_signal_resamples_to_250_hz_and_bridges_nans() -> None:
    x = np.sin(2 * np.pi * 1.2 * np.arange(5000) / 500.0)
    x[100:130] = np.nan
    y = net_signal(x, 500.0)
    assert y.size == 2500 and np.isfinite(y).all()
    assert net_signal(np.zeros(10), 100.0).size == 25  # too short to filter: still resampled, no error


def test_the_shipped_net_was_trained_on_the_tuning_half_only(shared_data) -> None:
    from tests.support.benchmarks import import_benchmark

    net = load_wave_net()
    trained = net.meta["trained_on"]
    split = import_benchmark("delineation").split_records(shared_data)
    assert trained["set"] == "tuning" and len(net.members) == net.meta["members"] >= 1
    assert set(trained["ludb"]) == set(split["ludb"]["tuning"]) and set(trained["qtdb"]) == set(split["qtdb"]["tuning"])
    assert not set(trained["ludb"]) & set(split["ludb"]["untuned"]) and not set(trained["qtdb"]) & set(split["qtdb"]["untuned"])
    assert net.provenance["sha256"] and net.provenance["members"] == len(net.members)


def test_probabilities_find_the_synthetic_waves(synth_record) -> None:
    """Sinus beats of the synthetic record (waves are Gaussians; boundaries at centre +/- 2.5 sigma, exact): at the R peak
    the net says QRS, at the P wave's centre P and at the T wave's centre T, in each lead where the wave is taller than
    0.1 mV; the probabilities sum to 1."""
    from ecgtrace.tools import render
    from ecgtrace.tools.annotations import read_reference_annotations
    from ecgtrace.tools.records import open_record

    info = open_record(synth_record.record_path)
    ann = read_reference_annotations(synth_record.record_path)
    truth = synth_record.schedule["morphology"]["N"]
    window = render.window_by_time(info, 200.0, 210.0)
    prob = wave_probabilities(window.signal_mv, window.fs_hz)
    assert prob.shape == (window.signal_mv.shape[0], len(window.leads), len(CLASSES))
    assert np.allclose(prob.sum(axis=2), 1.0)
    inside = np.flatnonzero((ann.beat_samples >= window.sampfrom + 300) & (ann.beat_samples < window.sampto - 300))
    sinus = [k for k in inside if ann.beat_symbols[k - 1] == ann.beat_symbols[k] == ann.beat_symbols[k + 1] == "N"]
    assert len(sinus) >= 6
    ms = info.fs_hz / 1000.0
    mlii = window.leads.index("MLII")
    for k in sinus:
        r = int(ann.beat_samples[k]) - window.sampfrom
        qrs_on = r - 45.0 * ms  # tools/synth.py: an N beat's QRS starts 45 ms before its R peak
        p_centre = int(round(qrs_on - truth["pr_ms"] * ms + 0.5 * truth["p_ms"] * ms))
        rr_s = float(np.clip((ann.beat_samples[k] - ann.beat_samples[k - 1]) / info.fs_hz, 0.3, 2.0))
        t_centre = int(round(qrs_on + (truth["qtc_ms"] * rr_s ** (1 / 3) - 0.5 * truth["t_ms"]) * ms))
        assert prob[r, mlii, CLASSES.index("qrs")] > 0.5, k
        assert prob[p_centre, mlii, CLASSES.index("p")] > 0.5, k
        assert prob[t_centre, mlii, CLASSES.index("t")] > 0.5, k
        assert prob[r, mlii, CLASSES.index("p")] < 0.2 and prob[p_centre, mlii, CLASSES.index("qrs")] < 0.2


def test_probabilities_do_not_depend_on_the_recording_rate(synth_record) -> None:
    """The same 10 s at 250 Hz and resampled to 500 Hz give the same probabilities on the 250 Hz samples.

    Measured: 99.95% of the samples get the same class and the mean |difference| is 0.0004; one net sample (4 ms) of
    misalignment between the rates would give 97.0% and 0.015, so the bounds below catch it."""
    from scipy.signal import resample_poly

    from ecgtrace.tools import render
    from ecgtrace.tools.records import open_record

    window = render.window_by_time(open_record(synth_record.record_path), 300.0, 310.0)
    at_250 = wave_probabilities(window.signal_mv, WAVE_NET_FS_HZ)
    at_500 = wave_probabilities(resample_poly(window.signal_mv, 2, 1, axis=0), 500.0)[::2]
    assert np.mean(at_250.argmax(axis=2) == at_500.argmax(axis=2)) > 0.995
    assert np.abs(at_250 - at_500).mean() < 0.003


def test_a_flat_or_missing_lead_has_no_waves() -> None:
    x = np.zeros((2500, 2))
    x[:, 1] = np.nan
    prob = wave_probabilities(x, 250.0)
    assert (prob.argmax(axis=2) == 0).mean() > 0.95


def test_a_long_window_read_in_blocks_matches_one_pass(synth_record, monkeypatch) -> None:
    """70 s (17500 net samples: three blocks) read in blocks gives the probabilities of one pass over the window."""
    from ecgtrace.tools import render
    from ecgtrace.tools.records import open_record

    window = render.window_by_time(open_record(synth_record.record_path), 100.0, 170.0)
    assert window.signal_mv.shape[0] > 2 * _wave_net.BLOCK_SAMPLES
    blocks = wave_probabilities(window.signal_mv, window.fs_hz)
    monkeypatch.setattr(_wave_net, "BLOCK_SAMPLES", 1 << 20)
    one_pass = wave_probabilities(window.signal_mv, window.fs_hz)
    assert np.abs(blocks - one_pass).max() < 1e-4


def _rewrite_model(tmp_path, name: str, header_change: dict | None = None, drop: str | None = None):
    """A copy of the shipped model with its header changed or one array left out."""
    with np.load(MODEL_PATH, allow_pickle=False) as z:
        header = json.loads(str(z["header"]))
        arrays = {k: z[k] for k in z.files if k != "header" and k != drop}
    header.update(header_change or {})
    path = tmp_path / name
    np.savez(path, header=np.array(json.dumps(header)), **arrays)
    return str(path)


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: str(tmp / "missing.npz"), "cannot be read"),
    (lambda tmp: (tmp / "junk.npz").write_bytes(b"not a zip") and str(tmp / "junk.npz"), "is not a model file"),
    (lambda tmp: (tmp / "cut.npz").write_bytes(MODEL_PATH.read_bytes()[:5000]) and str(tmp / "cut.npz"), "is not a model file"),
    (lambda tmp: _rewrite_model(tmp, "classes.npz", {"classes": ["none", "qrs", "p", "t"]}), "does not match"),
    (lambda tmp: _rewrite_model(tmp, "rate.npz", {"fs_hz": 500.0}), "does not match"),
    (lambda tmp: _rewrite_model(tmp, "format.npz", {"version": "99"}), "does not match"),
    (lambda tmp: _rewrite_model(tmp, "none.npz", {"members": 0}), "no members"),
    (lambda tmp: _rewrite_model(tmp, "depth.npz", {"depth": 3}), "does not fit"),
    (lambda tmp: _rewrite_model(tmp, "weight.npz", drop="m1/mida.w"), "member 1 does not fit"),
])
def test_a_broken_model_file_is_one_clear_error(tmp_path, make, message) -> None:
    path = make(tmp_path)
    with pytest.raises(EcgTraceError, match=message):
        load_wave_net(path)


def test_a_faithful_copy_loads_with_the_same_hash(tmp_path) -> None:
    copy = tmp_path / "copy.npz"
    shutil.copy(MODEL_PATH, copy)
    assert load_wave_net(str(copy)).sha256 == load_wave_net().sha256
