"""A small learned wave segmenter: per-sample P / QRS / T probabilities of each lead, on numpy.

The model is an ensemble of 1-D U-Nets (Ronneberger et al. 2015, the ECG form of
Moskalenko et al. 2019 and Jimenez-Perez et al. 2021) trained by
``benchmarks/train_wave_net.py`` (PyTorch, an optional extra) on the tuning half
of the delineation split only (LUDB 1-60 and QTDB's tuning records, cardiologists'
wave marks), and shipped as plain arrays in ``tools/data/wave_net.npz``: batch
normalization is folded into the convolutions, so inference is convolutions,
ReLU, max-pooling and nearest upsampling in numpy. No pickle, no framework at run time.

Every lead is read on its own, at ``WAVE_NET_FS_HZ`` (250 Hz), after
:func:`net_signal` (band-limited resampling, 0.5 Hz high-pass) and
:func:`normalize_lead` (median removed, divided by the 99th percentile of the
absolute deviation, floored at 0.05 mV so a flat lead stays flat). Training and
inference share these two functions: they are the one home of the input
convention. :func:`wave_probabilities` returns the class probabilities
(``CLASSES``: none, P, QRS, T) averaged over the ensemble, on the caller's
sample grid.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.errors import EcgTraceError
from ecgtrace.tools._delineate_filters import bridge_nan

__all__ = ["CLASSES", "WAVE_NET_FS_HZ", "WaveNet", "forward", "load_wave_net", "net_signal", "normalize_lead", "wave_probabilities"]

MODEL_PATH = Path(__file__).resolve().parent / "data" / "wave_net.npz"
WAVE_NET_FS_HZ = 250.0
CLASSES = ("none", "p", "qrs", "t")
HIGHPASS_HZ = 0.5
MODEL_FORMAT = "1"  # the header's "version": the input convention and architecture this module reads
#: Inference runs in blocks of this many net samples (32.8 s at 250 Hz; a multiple of every 2**depth up to 2**8) with
#: this much context (2.05 s) on each side: a 10-minute 12-lead window then needs about 100 MB, not 4 GB.
BLOCK_SAMPLES = 8192
BLOCK_MARGIN = 512
MIN_SCALE_MV = 0.05  # a lead whose 99th-percentile deviation is below this is scaled as if it were this (a flat lead stays flat)


@dataclass(frozen=True)
class WaveNet:
    """An ensemble of U-Nets as folded arrays: ``members[m][name]`` (see :func:`forward` for the names)."""

    members: tuple[dict[str, np.ndarray], ...]
    depth: int
    meta: dict[str, Any]
    sha256: str

    @property
    def provenance(self) -> dict[str, Any]:
        return {"method": "ecgtrace wave net (1-D U-Net ensemble)", "version": str(self.meta.get("version", "?")),
                "members": len(self.members), "sha256": self.sha256[:16], "trained_on": self.meta.get("trained_on", {})}


def net_signal(x_mv: np.ndarray, fs_hz: float) -> np.ndarray:
    """One lead (mV at ``fs_hz``) as the net reads it: NaNs bridged, resampled to 250 Hz, high-passed at 0.5 Hz (float64)."""
    from scipy.signal import butter, resample_poly, sosfiltfilt

    x = bridge_nan(x_mv)
    ratio = Fraction(WAVE_NET_FS_HZ / float(fs_hz)).limit_denominator(1000)
    if ratio != 1:
        x = resample_poly(x, ratio.numerator, ratio.denominator, padtype="line")
    if x.size < 32:  # too short for the filter's edge padding: the median is all the baseline there is
        return x - (np.median(x) if x.size else 0.0)
    return sosfiltfilt(butter(2, HIGHPASS_HZ, btype="highpass", fs=WAVE_NET_FS_HZ, output="sos"), x)


def normalize_lead(x: np.ndarray) -> np.ndarray:
    """Median removed, divided by the 99th percentile of the absolute deviation (at least ``MIN_SCALE_MV``); float32."""
    if x.size == 0:
        return np.zeros(0, dtype=np.float32)
    centred = x - np.median(x)
    scale = max(float(np.percentile(np.abs(centred), 99.0)), MIN_SCALE_MV)
    return (centred / scale).astype(np.float32)


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, relu: bool = True) -> np.ndarray:
    """``x`` (B, C, L), ``w`` (O, C, K) odd K -> (B, O, L): a 'same' cross-correlation (PyTorch's Conv1d), as one matrix product."""
    from numpy.lib.stride_tricks import sliding_window_view

    n_out, n_in, k = w.shape
    batch, _, length = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (k // 2, k // 2)))
    cols = np.ascontiguousarray(sliding_window_view(xp, k, axis=2).transpose(0, 2, 1, 3)).reshape(batch * length, n_in * k)
    y = (cols @ w.reshape(n_out, n_in * k).T).reshape(batch, length, n_out).transpose(0, 2, 1) + b[None, :, None]
    return np.maximum(y, 0.0) if relu else y


def _block(x: np.ndarray, net: dict[str, np.ndarray], name: str) -> np.ndarray:
    return _conv(_conv(x, net[f"{name}a.w"], net[f"{name}a.b"]), net[f"{name}b.w"], net[f"{name}b.b"])


def forward(net: dict[str, np.ndarray], depth: int, x: np.ndarray) -> np.ndarray:
    """Logits (B, classes, L) of one member for ``x`` (B, 1, L) float32, L a multiple of ``2**depth``.

    Encoder level i: two conv+ReLU (``enc{i}``), then max-pool by 2; the bottleneck
    (``mid``); decoder step i (``dec0`` is the deepest): nearest upsampling by 2,
    concatenation with the encoder's output of that level, two conv+ReLU; then a
    1x1 convolution (``out``).
    """
    skips = []
    for i in range(depth):
        x = _block(x, net, f"enc{i}")
        skips.append(x)
        batch, chans, length = x.shape
        x = x.reshape(batch, chans, length // 2, 2).max(axis=3)
    x = _block(x, net, "mid")
    for i in range(depth):
        skip = skips.pop()
        x = np.concatenate([np.repeat(x, 2, axis=2), skip], axis=1)
        x = _block(x, net, f"dec{i}")
    return np.einsum("oc,bcl->bol", net["out.w"][:, :, 0], x) + net["out.b"][None, :, None]


def _read_model(p: Path) -> tuple[dict[str, Any], dict[str, np.ndarray], str]:
    """``(header, arrays, sha256)`` of a model file; an EcgTraceError says what is wrong with it."""
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise EcgTraceError(f"wave net model {p} cannot be read ({exc.strerror or exc}); reinstall ecgtrace, or retrain it "
                            "with benchmarks/train_wave_net.py, or delineate with method='rules'") from None
    try:  # the bytes hashed are the bytes read: no second open
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            header = json.loads(str(z["header"]))
            arrays = {name: np.asarray(z[name]) for name in z.files if name != "header"}
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # JSONDecodeError is a ValueError
        raise EcgTraceError(f"wave net model {p} is not a model file ({type(exc).__name__}: {exc})") from None
    return header, arrays, hashlib.sha256(raw).hexdigest()


def _check_model(header: dict[str, Any], members: tuple[dict[str, np.ndarray], ...], depth: int, p: Path) -> None:
    """The header speaks this module's convention and every member runs to ``len(CLASSES)`` finite logits."""
    expected = {"version": MODEL_FORMAT, "classes": list(CLASSES), "fs_hz": WAVE_NET_FS_HZ}
    wrong = [f"{key} {header.get(key)!r} (this code reads {value!r})" for key, value in expected.items() if header.get(key) != value]
    if wrong:
        raise EcgTraceError(f"wave net model {p} does not match this version of ecgtrace: " + "; ".join(wrong))
    if not members:
        raise EcgTraceError(f"wave net model {p} has no members")
    probe = np.zeros((1, 1, 4 * 2 ** depth), dtype=np.float32)
    for m, member in enumerate(members):
        if not all(np.issubdtype(a.dtype, np.floating) and np.isfinite(a).all() for a in member.values()):
            raise EcgTraceError(f"wave net model {p}: member {m} has non-float or non-finite weights")
        try:
            shape = forward(member, depth, probe).shape
        except (KeyError, ValueError) as exc:
            raise EcgTraceError(f"wave net model {p}: member {m} does not fit the U-Net of depth {depth} ({type(exc).__name__}: {exc})") from None
        if shape != (1, len(CLASSES), probe.shape[2]):
            raise EcgTraceError(f"wave net model {p}: member {m} gives logits of shape {shape}")


@lru_cache(maxsize=2)
def load_wave_net(path: str | None = None) -> WaveNet:
    """The shipped ensemble (cached), checked; an EcgTraceError where the file is missing, corrupt or of another format."""
    p = Path(path) if path else MODEL_PATH
    header, arrays, sha256 = _read_model(p)
    if not isinstance(header, dict):
        raise EcgTraceError(f"wave net model {p}: the header is not a JSON object")
    try:
        n_members, depth = int(header["members"]), int(header["depth"])
    except (KeyError, TypeError, ValueError):
        raise EcgTraceError(f"wave net model {p}: the header lacks an integer 'members' and 'depth'") from None
    if not 1 <= depth <= 8:
        raise EcgTraceError(f"wave net model {p}: depth {depth} is outside 1-8")
    members = tuple({name.split("/", 1)[1]: a for name, a in arrays.items() if name.startswith(f"m{m}/")} for m in range(n_members))
    _check_model(header, members, depth, p)
    return WaveNet(members=members, depth=depth, meta=header, sha256=sha256)


def _ensemble_probabilities(net: WaveNet, leads: np.ndarray) -> np.ndarray:
    """Mean class probabilities ``(n_leads, classes, m)`` of ``leads`` ``(n_leads, m)`` (net input), block by block.

    Blocks of ``BLOCK_SAMPLES`` are read with ``BLOCK_MARGIN`` samples of context on each
    side, more than the net's receptive field reaches (about 1.5 s each way), and start
    on multiples of ``2**depth`` so the pooling sees the samples as in one pass: the
    result is that of one pass over the whole window, with memory bounded by the block.
    """
    n_leads, m = leads.shape
    unit = 2 ** net.depth
    out = np.zeros((n_leads, len(CLASSES), m))
    for start in range(0, m, BLOCK_SAMPLES):
        stop = min(start + BLOCK_SAMPLES, m)
        lo, hi = max(start - BLOCK_MARGIN, 0), min(stop + BLOCK_MARGIN, m)
        block = np.zeros((n_leads, 1, -(-(hi - lo) // unit) * unit), dtype=np.float32)
        block[:, 0, : hi - lo] = leads[:, lo:hi]
        for member in net.members:
            logits = forward(member, net.depth, block)[:, :, start - lo : stop - lo].astype(np.float64)
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            out[:, :, start:stop] += e / e.sum(axis=1, keepdims=True)
    return out / len(net.members)


def wave_probabilities(signal_mv: np.ndarray, fs_hz: float, net: WaveNet | None = None) -> np.ndarray:
    """Class probabilities ``(n_samples, n_leads, 4)`` (``CLASSES`` order) on the input's own sample grid.

    ``signal_mv`` is ``(n_samples, n_leads)`` (or one lead, 1-D) at ``fs_hz``. Each lead is
    read at 250 Hz; the ensemble's mean probabilities are brought back to ``fs_hz`` by
    linear interpolation in time. Memory is bounded by blocks of ``BLOCK_SAMPLES``,
    whatever the window's length.
    """
    net = net or load_wave_net()
    x = np.asarray(signal_mv, dtype=np.float64)
    single = x.ndim == 1
    x = x[:, None] if single else x
    n, n_leads = x.shape
    leads = [normalize_lead(net_signal(x[:, j], fs_hz)) for j in range(n_leads)]
    m = leads[0].size if leads else 0
    prob = _ensemble_probabilities(net, np.stack(leads) if leads else np.zeros((0, 0), dtype=np.float32))
    t_net = np.arange(m) / WAVE_NET_FS_HZ
    t_out = np.arange(n) / float(fs_hz)
    out = np.empty((n, n_leads, len(CLASSES)))
    for j in range(n_leads):
        for c in range(len(CLASSES)):
            out[:, j, c] = np.interp(t_out, t_net, prob[j, c]) if m else (1.0 if c == 0 else 0.0)
    return out[:, 0, :] if single else out
