"""Train the wave net (``tools/data/wave_net.npz``) on the tuning half of the delineation split only.

Needs PyTorch, which the package does not (inference is numpy,
:mod:`ecgtrace.tools._wave_net`). On this machine a CPU build lies on disk:

    .venv/bin/pip install torch==2.13.0
    nice -n 10 .venv/bin/python benchmarks/train_wave_net.py                 # the shipped ensemble (3 members)
    .venv/bin/python benchmarks/train_wave_net.py --set fit --out /tmp/fit.npz  # model selection: LUDB 1-45 + half of QTDB's tuning records

Records (``benchmarks/delineation.py:split_records``): ``--set tuning`` is LUDB 1-60
and QTDB's tuning half, the only records the shipped model sees; ``--set fit``
holds out LUDB 46-60 and every other QTDB tuning record (``validation``) for
choices such as the width, the steps and the post-processing, so that no choice
reads the untuned half. Each member is a 1-D U-Net (depth 4, kernel 9,
channels ``c, 2c, 4c, 4c, 4c``) trained on random 4.1 s crops with a set-valued
cross-entropy over the marked samples, AdamW and a one-cycle schedule, on
crops augmented the way recordings differ: polarity, gain, white noise, baseline
wander, mains hum, a 100 Hz recording upsampled, and P waves moved up to 200 ms
earlier (:func:`lengthen_pr`: first-degree AV block). A label is the set of classes
a sample may belong to (``_wave_net_data``): the loss is -log of the probability
the net gives that set, so a partly marked stretch ("none or T" where QTDB marks no
T onset) teaches what it rules out and nothing more. Members differ by seed; the
ensemble averages their probabilities. The same seeds give the same weights on
the same machine (PyTorch CPU kernels).

Crops are drawn uniformly over the labelled leads, so QTDB's two-lead records give about
1 crop in 12 (1 in 18 on the fit set). ``--qtdb-share`` draws that share from QTDB instead. Tried at 0.25 (``--set fit``,
scored on the validation records; SD in ms, P on / P off / QRS on / QRS off / T off): QTDB
8.8 / 8.2 / 17.0 / 13.5 / 35.4 uniform against 9.8 / 7.9 / 15.9 / 15.4 / 37.2, LUDB cross-lead
14.6 / 8.3 / 4.9 / 5.2 / 17.4 against 11.7 / 9.4 / 4.8 / 4.9 / 15.2: no consistent gain, so the
shipped net keeps the uniform draw. Pooling both runs into six members did not help either
(QTDB 9.2 / 8.0 / 16.8 / 14.0 / 34.4).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ecgtrace.tools._wave_net import CLASSES, HIGHPASS_HZ, MODEL_FORMAT, MODEL_PATH, WAVE_NET_FS_HZ, normalize_lead

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _wave_net_data import NONE, P, QRS, UNKNOWN, LabelledLead, ludb_record, qtdb_record  # noqa: E402
from delineation import DATA, split_records  # noqa: E402



def record_sets() -> dict[str, dict[str, list[str]]]:
    """``tuning`` (everything the shipped net may see), ``fit`` and ``validation`` (its model-selection halves), ``untuned``."""
    split = split_records()
    ludb, qtdb = split["ludb"]["tuning"], split["qtdb"]["tuning"]
    return {
        "tuning": {"ludb": ludb, "qtdb": qtdb},
        "fit": {"ludb": [n for n in ludb if int(n) <= 45], "qtdb": qtdb[0::2]},
        "validation": {"ludb": [n for n in ludb if int(n) > 45], "qtdb": qtdb[1::2]},
        "untuned": {"ludb": split["ludb"]["untuned"], "qtdb": split["qtdb"]["untuned"]},
    }


def load_leads(records: dict[str, list[str]]) -> list[LabelledLead]:
    leads: list[LabelledLead] = []
    for number in records["ludb"]:
        leads += ludb_record(DATA / "ludb" / "data", number)
    for name in records["qtdb"]:
        leads += qtdb_record(DATA / "qtdb", name)
    return leads


def unet(channels: int, depth: int = 4, kernel: int = 9):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, c_in: int, c_out: int) -> None:
            super().__init__()
            self.c1, self.b1 = nn.Conv1d(c_in, c_out, kernel, padding=kernel // 2), nn.BatchNorm1d(c_out)
            self.c2, self.b2 = nn.Conv1d(c_out, c_out, kernel, padding=kernel // 2), nn.BatchNorm1d(c_out)

        def forward(self, x):
            return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))))

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            chans = [channels * min(2**i, 4) for i in range(depth + 1)]
            self.depth = depth
            self.enc = nn.ModuleList([Block(1 if i == 0 else chans[i - 1], chans[i]) for i in range(depth)])
            self.mid = Block(chans[depth - 1], chans[depth])
            self.dec = nn.ModuleList([Block(chans[i + 1] + chans[i], chans[i]) for i in reversed(range(depth))])
            self.out = nn.Conv1d(chans[0], len(CLASSES), 1)

        def forward(self, x):
            skips = []
            for block in self.enc:
                x = block(x)
                skips.append(x)
                x = F.max_pool1d(x, 2)
            x = self.mid(x)
            for block in self.dec:
                skip = skips.pop()
                x = block(torch.cat([torch.repeat_interleave(x, 2, dim=2), skip], 1))
            return self.out(x)

    return UNet()


def augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One crop as another recording might show it (then high-passed again, as :func:`net_signal` would)."""
    from scipy.signal import butter, resample_poly, sosfiltfilt

    n = x.size
    t = np.arange(n) / WAVE_NET_FS_HZ
    x = (-x if rng.random() < 0.3 else x) * rng.uniform(0.5, 2.0)
    scale = float(np.percentile(np.abs(x), 99)) + 1e-3
    x = x + rng.normal(0.0, rng.uniform(0.0, 0.04) * scale, n)
    if rng.random() < 0.5:
        x = x + rng.uniform(0.0, 0.3) * scale * np.sin(2 * np.pi * rng.uniform(0.05, 0.5) * t + rng.uniform(0, 2 * np.pi))
    if rng.random() < 0.2:
        x = x + rng.uniform(0.0, 0.05) * scale * np.sin(2 * np.pi * rng.choice([50.0, 60.0]) * t + rng.uniform(0, 2 * np.pi))
    if rng.random() < 0.3:
        x = resample_poly(resample_poly(x, 2, 5), 5, 2)[:n]
    return sosfiltfilt(butter(2, HIGHPASS_HZ, btype="highpass", fs=WAVE_NET_FS_HZ, output="sos"), x)


def lengthen_pr(x: np.ndarray, labels: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """The crop with every marked P wave moved ``shift`` samples earlier, as in first-degree AV block.

    A P wave moves only where the stretch it moves into is marked none (the T-P
    baseline, never a T wave) and a none stretch then the QRS follow it; the
    stretch it leaves becomes a straight line to the QRS onset (an isoelectric PR
    segment). The training records hold few PR intervals over 200 ms, and a net
    that only ever saw P waves close to the QRS looks for them there.
    """
    x, labels = x.copy(), labels.copy()
    in_p = np.r_[False, labels == P, False]
    starts, ends = np.flatnonzero(np.diff(in_p.astype(np.int8)) == 1), np.flatnonzero(np.diff(in_p.astype(np.int8)) == -1) - 1
    for p0, p1 in zip(starts, ends):
        q0 = p1 + 1
        while q0 < labels.size and labels[q0] == NONE:
            q0 += 1
        room = p0 - shift - 3
        if q0 >= labels.size or labels[q0] != QRS or room < 1 or not (labels[room:p0] == NONE).all():
            continue
        offset = x[p0 - shift - 1] - x[p0 - 1]
        x[p0 - shift : p1 - shift + 1] = x[p0 : p1 + 1] + offset
        x[p1 - shift + 1 : q0] = np.linspace(x[p1 - shift], x[q0], q0 - p1 + shift + 1)[1:-1]
        labels[p0 - shift : p1 - shift + 1] = P
        labels[p1 - shift + 1 : q0] = NONE
    return x, labels


def database_pools(leads: list[LabelledLead]) -> dict[str, list[LabelledLead]]:
    """The leads by database, as :func:`pick_lead` draws from them (``"qtdb/"``, ``"ludb/"``)."""
    return {prefix: [lead for lead in leads if lead.name.startswith(prefix)] for prefix in ("qtdb/", "ludb/")}


def pick_lead(leads: list[LabelledLead], rng: np.random.Generator, qtdb_share: float | None,
              pools: dict[str, list[LabelledLead]] | None = None) -> LabelledLead:
    """A random lead: uniform over ``leads``, or from QTDB with probability ``qtdb_share`` (else from LUDB).

    Uniform, QTDB's 2-lead records give about 1 crop in 12 beside LUDB's 12-lead ones, though
    two leads at 250 Hz is what a Holter recording looks like. ``pools``: :func:`database_pools`
    of ``leads``, computed once by a caller that draws many.
    """
    if qtdb_share is None:
        return leads[int(rng.integers(len(leads)))]
    pool = (pools or database_pools(leads))["qtdb/" if rng.random() < qtdb_share else "ludb/"] or leads
    return pool[int(rng.integers(len(pool)))]


def batch(leads: list[LabelledLead], rng: np.random.Generator, size: int, length: int,
          qtdb_share: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``size`` random crops of ``length`` samples, each holding labelled samples (leads drawn by :func:`pick_lead`)."""
    x = np.zeros((size, 1, length), dtype=np.float32)
    y = np.full((size, length), UNKNOWN, dtype=np.uint8)
    pools = database_pools(leads) if qtdb_share is not None else None
    k = 0
    while k < size:
        lead = pick_lead(leads, rng, qtdb_share, pools)
        known = np.flatnonzero(lead.labels != UNKNOWN)
        if known.size < 200:
            continue
        start = int(np.clip(int(rng.choice(known)) - int(rng.integers(length)), 0, max(lead.signal.size - length, 0)))
        seg, lab = lead.signal[start : start + length], lead.labels[start : start + length]
        if rng.random() < 0.3:
            seg, lab = lengthen_pr(seg, lab, int(rng.integers(5, 51)))  # 20-200 ms longer
        x[k, 0, : seg.size] = normalize_lead(augment(seg, rng))
        y[k, : lab.size] = lab
        k += 1
    return x, y


def set_loss(logits, allowed_bits):
    """Mean over samples with a label of -log P(class in the allowed set); ``allowed_bits`` (B, L) uint8 as ``_wave_net_data``."""
    import torch

    bits = torch.from_numpy(allowed_bits.astype(np.int64))
    allowed = torch.stack([(bits >> c) & 1 for c in range(len(CLASSES))], dim=1).bool()  # (B, classes, L)
    log_p = torch.log_softmax(logits, dim=1).masked_fill(~allowed, float("-inf"))
    marked = bits != UNKNOWN
    return -torch.logsumexp(log_p, dim=1)[marked].mean()


def train_member(leads: list[LabelledLead], seed: int, channels: int, steps: int, lr: float, log,
                 qtdb_share: float | None = None) -> tuple[object, list[float]]:
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = unet(channels)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(steps):
        x, y = batch(leads, rng, 32, 1024, qtdb_share)
        model.train()
        loss = set_loss(model(torch.from_numpy(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
        losses.append(float(loss.item()))
        if step % 500 == 0 or step == steps - 1:
            log(f"  seed {seed} step {step}: loss {np.mean(losses[-100:]):.4f} ({time.perf_counter() - t0:.0f} s)")
    model.eval()
    return model, losses


def folded(model) -> dict[str, np.ndarray]:
    """The member's arrays for :func:`ecgtrace.tools._wave_net.forward`: batch norm folded into each convolution."""
    sd = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    arrays: dict[str, np.ndarray] = {}

    def fold(conv: str, bn: str, name: str) -> None:
        s = sd[f"{bn}.weight"] / np.sqrt(sd[f"{bn}.running_var"] + 1e-5)
        arrays[f"{name}.w"] = (sd[f"{conv}.weight"] * s[:, None, None]).astype(np.float32)
        arrays[f"{name}.b"] = ((sd[f"{conv}.bias"] - sd[f"{bn}.running_mean"]) * s + sd[f"{bn}.bias"]).astype(np.float32)

    for i in range(model.depth):
        fold(f"enc.{i}.c1", f"enc.{i}.b1", f"enc{i}a")
        fold(f"enc.{i}.c2", f"enc.{i}.b2", f"enc{i}b")
        fold(f"dec.{i}.c1", f"dec.{i}.b1", f"dec{i}a")
        fold(f"dec.{i}.c2", f"dec.{i}.b2", f"dec{i}b")
    fold("mid.c1", "mid.b1", "mida")
    fold("mid.c2", "mid.b2", "midb")
    arrays["out.w"] = sd["out.weight"].astype(np.float32)
    arrays["out.b"] = sd["out.bias"].astype(np.float32)
    return arrays


def check_export(model, arrays: dict[str, np.ndarray]) -> float:
    """Largest |numpy - torch| logit on a random input: the export must reproduce the trained member."""
    import torch

    from ecgtrace.tools._wave_net import forward

    x = np.random.default_rng(0).standard_normal((2, 1, 1024)).astype(np.float32)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    return float(np.abs(forward(arrays, model.depth, x) - ref).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=("tuning", "fit"), default="tuning")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="first member's seed (member m: seed + m)")
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--qtdb-share", type=float, default=None,
                        help="share of crops drawn from QTDB's leads, 0-1 (default: uniform over all leads, about 1 in 12)")
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)
    if args.qtdb_share is not None and not 0.0 <= args.qtdb_share <= 1.0:
        print(f"error: --qtdb-share is a share of the crops, from 0 to 1 (got {args.qtdb_share:g})", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("error: training needs PyTorch: .venv/bin/pip install torch==2.13.0 (a CPU build)", file=sys.stderr)
        return 2
    if not DATA.exists():
        print(f"error: no shared data at {DATA}", file=sys.stderr)
        return 2
    torch.set_num_threads(2)
    records = record_sets()[args.set]
    leads = load_leads(records)
    print(f"{len(leads)} labelled leads from LUDB {len(records['ludb'])} and QTDB {len(records['qtdb'])} records ({args.set})")
    arrays: dict[str, np.ndarray] = {}
    card: dict = {"version": MODEL_FORMAT, "members": args.members, "depth": 4, "kernel": 9, "channels": args.channels, "classes": list(CLASSES),
                  "fs_hz": WAVE_NET_FS_HZ, "trained_on": {"set": args.set, **records}, "steps": args.steps, "lr": args.lr,
                  "seeds": [args.seed + m for m in range(args.members)], "torch": torch.__version__, "final_loss": [],
                  "qtdb_share": args.qtdb_share}
    t0 = time.perf_counter()
    for m in range(args.members):
        model, losses = train_member(leads, args.seed + m, args.channels, args.steps, args.lr, print, args.qtdb_share)
        member = folded(model)
        err = check_export(model, member)
        if err > 1e-3:
            print(f"error: member {m}'s numpy export differs from PyTorch by {err:g}", file=sys.stderr)
            return 1
        arrays.update({f"m{m}/{k}": v for k, v in member.items()})
        card["final_loss"].append(round(float(np.mean(losses[-200:])), 4))
    card["train_seconds"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp.npz")
    np.savez_compressed(tmp, header=np.array(json.dumps(card, sort_keys=True)), **arrays)
    tmp.replace(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB, {card['train_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
