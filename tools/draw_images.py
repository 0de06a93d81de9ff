"""Draw the course's diagrams into ``images/``, reproducibly.

    python -m tools.draw_images            # (re)draw every diagram into images/
    python -m tools.draw_images --check    # redraw into a temporary folder and compare

Every picture a notebook shows that is not computed by the notebook itself is drawn here
with matplotlib, from code, so that it can be regenerated and reviewed like code. The
drawing is deterministic: fixed figure sizes and resolution, the font that ships with
matplotlib (DejaVu Sans), and no ``Software`` or date entries in the PNG metadata, so
drawing twice gives the same bytes.

``--check`` redraws into a temporary folder and compares each picture with the one in
``images/`` pixel by pixel (the PNG bytes may differ between zlib builds; the picture may
not). It exits 1 and names the files when a picture is missing, differs, or when
``images/`` holds a PNG that this script does not draw.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from matplotlib.typing import RcKeyType  # noqa: E402

# Run as a file (`python tools/draw_images.py`), not as `python -m tools.draw_images`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.nbtools import REPO_ROOT as ROOT  # noqa: E402  (puts src/ on the path if needed)

# isort: split
from dtf import masking  # noqa: E402  (after tools.nbtools, which can make it importable)

IMAGES = ROOT / "images"
DPI = 100
STYLE: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "svg.hashsalt": "dtf",
    "path.simplify": False,
}
# Colours (matplotlib's default cycle, so the diagrams match the notebooks' charts).
CPU = "#1f77b4"
DEVICE = "#ff7f0e"
DATA = "#2ca02c"
GREY = "#b0b0b0"
TEXT = "#222222"


# --------------------------------------------------------------------------- helpers


def box(ax, x, y, w, h, text="", *, color=DEVICE, fill=0.18, size=10, weight="normal", **kw):
    """A rounded box centred at (x, y), w wide and h high, with centred text."""
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0.02,rounding_size=0.06",
        linewidth=1.4,
        edgecolor=color,
        facecolor=matplotlib.colors.to_rgba(color, fill),
        **kw,
    )
    ax.add_patch(patch)
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=size, color=TEXT, weight=weight)
    return patch


def arrow(ax, start, end, *, color=TEXT, style="-|>", lw=1.3, ls="-", text="", side=0.0, **kw):
    """An arrow from ``start`` to ``end``; ``text`` is written at its middle, shifted by side."""
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        arrowprops=dict(arrowstyle=style, color=color, lw=lw, linestyle=ls, shrinkA=2, shrinkB=2),
    )
    if text:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        ax.text(mx + side, my, text, ha="center", va="center", fontsize=8.5, color=color, **kw)


def canvas(width, height, *, ncols=1):
    """A figure of fixed size whose axes use inches as data units (no ticks, no frame)."""
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), dpi=DPI, squeeze=False)
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.99, wspace=0.04)
    for ax in axes[0]:
        w = width / ncols
        ax.set_xlim(0, w)
        ax.set_ylim(0, height)
        ax.set_aspect("equal")
        ax.axis("off")
    return fig, list(axes[0])


# --------------------------------------------------------------------------- diagrams

NUM_PHYSICAL = 8
MASK_EXAMPLES = [
    ("4,5,6,7", "the listed GPUs are renumbered from 0"),
    ("2,1", "the order of the list is the new numbering"),
    ("0,2,-1,1", "an invalid index (-1) ends the list: GPU 1 stays hidden"),
]


def draw_mask_to_visible(fig_path: Path) -> None:
    """01: how CUDA_VISIBLE_DEVICES maps physical GPUs to TensorFlow's GPU:k names."""
    rows = len(MASK_EXAMPLES)
    row_h = 2.05
    height = rows * row_h - 0.05
    fig, (ax,) = canvas(9.0, height)
    pitch, bw, bh = 0.95, 0.78, 0.42
    x0 = 1.45
    for r, (mask, note) in enumerate(MASK_EXAMPLES):
        top = height - 0.02 - r * row_h
        visible = masking.parse_mask(mask, NUM_PHYSICAL)  # the same model notebook 01 uses
        ax.text(
            0.12,
            top - 0.18,
            f"CUDA_VISIBLE_DEVICES={mask}",
            fontsize=11,
            weight="bold",
            family="DejaVu Sans Mono",
            va="center",
        )
        ax.text(x0 + 3.4 * pitch, top - 0.18, note, fontsize=9.5, style="italic", va="center")
        y_phys, y_vis = top - 0.72, top - 1.62
        ax.text(0.12, y_phys, "physical\nGPUs", fontsize=8.5, va="center")
        ax.text(0.12, y_vis, "TensorFlow\nsees", fontsize=8.5, va="center")
        for i in range(NUM_PHYSICAL):
            shown = i in visible
            box(
                ax,
                x0 + i * pitch,
                y_phys,
                bw,
                bh,
                f"GPU {i}",
                color=DEVICE if shown else GREY,
                fill=0.22 if shown else 0.08,
                size=9,
            )
        for k, i in enumerate(visible):
            xv = x0 + k * pitch
            box(ax, xv, y_vis, bw, bh, f"GPU:{k}", color=CPU, fill=0.22, size=9, weight="bold")
            arrow(ax, (x0 + i * pitch, y_phys - bh / 2), (xv, y_vis + bh / 2), color=CPU)
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_tower_step(fig_path: Path) -> None:
    """03: one synchronous training step with in-graph towers."""
    fig, (ax,) = canvas(9.6, 4.9)
    mid = 2.45
    # 1. the global batch, split on the CPU
    box(ax, 1.0, mid, 1.6, 1.1, "global batch\nB examples\n(on the CPU)", color=DATA, size=9.5)
    ax.text(1.0, mid + 0.8, "1 · split", ha="center", fontsize=10, weight="bold")
    towers = [
        (3.65, "tower 1 on device 1"),
        (2.45, "tower 2 on device 2"),
        (0.85, "tower N on device N"),
    ]
    ax.text(4.15, 1.65, "⋮", ha="center", va="center", fontsize=16)
    ax.text(4.15, 4.55, "2 · every tower at the same time", ha="center", fontsize=10, weight="bold")
    for y, label in towers:
        arrow(ax, (1.82, mid), (2.57, y), color=DATA)
        box(
            ax,
            4.15,
            y,
            3.1,
            0.9,
            f"{label}\nforward pass → mean loss of its shard\n→ gradients of every variable",
            size=8.8,
        )
        arrow(ax, (5.72, y), (6.45, mid), color=DEVICE)
    ax.text(2.05, 3.3, "B/N each", fontsize=8.5, color=DATA, ha="center")
    # 3. average, 4. one update, both on the CPU that holds the parameters
    box(ax, 7.0, mid, 1.05, 1.2, "average\neach\nvariable's\ngradients", color=CPU, size=8.8)
    ax.text(7.0, mid - 0.85, "3 · average", ha="center", fontsize=10, weight="bold")
    arrow(ax, (7.55, mid), (8.05, mid), color=CPU)
    box(
        ax,
        8.75,
        mid,
        1.3,
        1.2,
        "one update\nw ← w − lr · avg\n(parameters\non the CPU)",
        color=CPU,
        size=8.5,
    )
    ax.text(8.75, mid - 0.85, "4 · apply once", ha="center", fontsize=10, weight="bold")
    # the next step reads the new parameters
    ax.annotate(
        "",
        xy=(5.74, 3.85),
        xytext=(8.75, mid + 0.64),
        arrowprops=dict(
            arrowstyle="-|>", color=CPU, lw=1.2, ls="--", connectionstyle="arc3,rad=0.3"
        ),
    )
    ax.text(
        7.9,
        4.2,
        "next step: every tower\nreads the new parameters",
        fontsize=8.5,
        color=CPU,
        ha="center",
    )
    ax.text(
        4.8,
        0.12,
        "Equal shards: the average of the N tower gradients is the gradient of the mean loss "
        "over all B examples.",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def _device(ax, x, y, lines, *, label="", color=DEVICE, w=1.9, h=1.05, size=8.8):
    """A device box with its text; ``label`` (bold) above it."""
    box(ax, x, y, w, h, "\n".join(lines), color=color, size=size)
    if label:
        ax.text(x, y + h / 2 + 0.12, label, ha="center", fontsize=9, weight="bold", color=color)


def draw_model_vs_data_parallel(fig_path: Path) -> None:
    """03: model parallelism (parts of the model) vs data parallelism (parts of the batch)."""
    width = 5.3
    fig, (left, right) = canvas(2 * width, 4.2, ncols=2)
    c = width / 2
    # model parallel: the whole batch flows through device 1, then device 2
    left.text(c, 3.95, "Model parallelism", ha="center", fontsize=12, weight="bold")
    left.text(c, 3.6, "each device holds a different part of the model", ha="center", fontsize=9)
    box(left, 0.6, 1.95, 0.95, 0.8, "whole\nbatch", color=DATA, size=9)
    _device(left, 2.2, 1.95, ["layer 1", "weights_1, biases_1"], label="device 1", w=1.75)
    _device(left, 4.3, 1.95, ["layer 2", "weights_2, biases_2"], label="device 2", w=1.75)
    arrow(left, (1.08, 1.95), (1.32, 1.95), color=DATA)
    arrow(left, (3.08, 1.95), (3.42, 1.95), color=DEVICE)
    left.text(3.25, 1.2, "activations travel", ha="center", fontsize=8.5, color=DEVICE)
    left.text(
        c,
        0.35,
        "for a model too big for one device;\ndevices wait for each other unless pipelined",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    # data parallel: each device runs the whole model on its shard
    right.text(c, 3.95, "Data parallelism (towers)", ha="center", fontsize=12, weight="bold")
    right.text(c, 3.6, "each device runs the whole model on its share", ha="center", fontsize=9)
    box(right, 0.7, 1.95, 1.1, 0.8, "batch of\nB examples", color=DATA, size=9)
    for y, k in [(2.65, 1), (1.25, 2)]:
        arrow(right, (1.26, 1.95), (2.05, y), color=DATA)
        _device(
            right,
            3.0,
            y,
            ["layers 1 and 2", "(the whole model)"],
            label=f"device {k}",
            w=1.85,
            h=0.8,
        )
        arrow(right, (3.93, y), (4.4, 1.95), color=DEVICE)
    right.text(1.45, 2.55, "B/2", fontsize=8.5, color=DATA, ha="center")
    right.text(1.45, 1.3, "B/2", fontsize=8.5, color=DATA, ha="center")
    box(right, 4.8, 1.95, 0.75, 0.8, "average\ngrads", color=CPU, size=8.5)
    right.text(
        c,
        0.35,
        "the same work on different data; the gradients\n"
        "are combined, so every copy stays the same",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_parameter_layouts(fig_path: Path) -> None:
    """03b: where the variables of a data-parallel step live, and what travels each step."""
    fig, axes = canvas(12.0, 4.4, ncols=3)
    titles = [
        ("Parameters on the CPU", "cifar10_multi_gpu_train.py; notebook 03b, section 1"),
        ("Parameters spread over the devices", "notebook 03b, section 3"),
        ("A copy on every device", "MirroredStrategy (later in the course)"),
    ]
    for ax, (title, where) in zip(axes, titles, strict=True):
        ax.text(2.0, 4.15, title, ha="center", fontsize=11.5, weight="bold")
        ax.text(2.0, 3.85, where, ha="center", fontsize=8.8, style="italic")
    # (a) everything on the CPU: every tower reads every parameter, sends every gradient
    a = axes[0]
    box(a, 2.0, 3.0, 2.2, 0.7, "CPU\nall variables, average, update", color=CPU, size=8.8)
    for x, k, sign in [(0.95, 1, -1), (3.05, 2, 1)]:
        box(a, x, 0.95, 1.5, 0.7, f"device {k}\ntower {k}", size=8.8)
        arrow(a, (2.0 + sign * 0.6, 2.63), (x - 0.12, 1.32), color=CPU)
        arrow(a, (x + 0.12, 1.32), (2.0 + sign * 0.36, 2.63), color=DEVICE)
    a.text(0.42, 2.05, "read every\nparameter", fontsize=8.3, color=CPU, ha="center")
    a.text(3.58, 2.05, "send every\ngradient", fontsize=8.3, color=DEVICE, ha="center")
    a.text(2.0, 0.2, "all traffic goes through the CPU", ha="center", fontsize=8.8, style="italic")
    # (b) layer 1's variables on device 1, layer 2's on device 2
    b = axes[1]
    for x, k in [(0.95, 1), (3.05, 2)]:
        _device(
            b,
            x,
            2.35,
            [f"tower {k}", f"weights_{k}, biases_{k}", "their average, update"],
            label=f"device {k}",
            w=1.75,
            h=0.95,
            size=8.5,
        )
    arrow(b, (1.85, 2.35), (2.15, 2.35), color=DEVICE, style="<|-|>")
    b.text(
        2.0,
        1.2,
        "each variable's reads and\ngradients go to where it lives",
        ha="center",
        fontsize=8.5,
        color=DEVICE,
    )
    b.text(
        2.0, 0.2, "traffic shared out; no central device", ha="center", fontsize=8.8, style="italic"
    )
    # (c) a full copy per device, gradients all-reduced between the devices
    c = axes[2]
    for x, k in [(0.95, 1), (3.05, 2)]:
        _device(
            c,
            x,
            2.35,
            [f"tower {k}", "a copy of every", "variable"],
            label=f"device {k}",
            w=1.75,
            h=0.95,
            size=8.5,
        )
    arrow(c, (1.85, 2.35), (2.15, 2.35), color=CPU, style="<|-|>", lw=1.8)
    c.text(
        2.0,
        1.2,
        "all-reduce the gradients\n(NCCL on NVIDIA GPUs); every\ncopy applies the same update",
        ha="center",
        fontsize=8.5,
        color=CPU,
    )
    c.text(
        2.0,
        0.2,
        "no parameter reads; the CPU is not involved",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_cluster_layout(fig_path: Path) -> None:
    """07: the cluster of *Distributed Computation in TensorFlow*: a host and two workers."""
    fig, (ax,) = canvas(9.6, 3.9)
    title = "config.json: one host task and two worker tasks"
    ax.text(4.8, 3.65, title, ha="center", fontsize=11.5, weight="bold")
    host = ["the program:", "builds the graph,", "connects, prints d"]
    _device(ax, 1.3, 1.75, host, label="host/0", color=CPU, w=2.0, h=1.2)
    _device(ax, 5.3, 2.6, ["a, b;  c = matmul(a, b)"], label="worker/0", w=2.6, h=0.7)
    _device(ax, 5.3, 0.9, ["d = matmul(a, b) + log(100 + c)"], label="worker/1", w=3.3, h=0.7)
    arrow(ax, (2.33, 2.15), (3.97, 2.6), color=CPU)
    ax.text(3.0, 2.62, "its ops", fontsize=8.5, color=CPU, ha="center")
    arrow(ax, (2.33, 1.55), (3.62, 1.1), color=CPU)
    ax.text(2.85, 1.62, "its ops", fontsize=8.5, color=CPU, ha="center")
    arrow(ax, (5.3, 2.23), (5.3, 1.5), color=DEVICE)
    ax.text(5.42, 1.85, "c", fontsize=9, color=DEVICE)
    arrow(ax, (3.62, 0.72), (2.33, 1.22), color=DEVICE)
    ax.text(2.95, 0.72, "d", fontsize=9, color=DEVICE)
    for y in (2.6, 0.9):
        ax.text(
            8.45,
            y,
            "a server process\n(dtf-server)",
            ha="center",
            fontsize=8.5,
            style="italic",
        )
    note = "every task listens on its own address; on one machine, 127.0.0.1 with one port each"
    ax.text(4.8, 0.1, note, ha="center", fontsize=8.8, style="italic")
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_ps_vs_allreduce(fig_path: Path) -> None:
    """08, 11: asynchronous parameter servers versus synchronous all-reduce."""
    fig, (left, right) = canvas(11.0, 4.3, ncols=2)
    c = 2.75
    left.text(c, 4.05, "Parameter server (asynchronous)", ha="center", fontsize=12, weight="bold")
    left.text(
        c,
        3.72,
        "ParameterServerStrategy; TF1 replica_device_setter",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    box(left, c, 2.85, 2.2, 0.62, "ps: the variables", color=CPU, size=9)
    for x, k in [(0.8, 0), (c, 1), (4.7, 2)]:
        box(left, x, 1.15, 1.3, 0.62, f"worker {k}", size=9)
        arrow(left, (x + 0.12, 1.47), (c + (x - c) * 0.35 + 0.1, 2.53), color=DEVICE)
        arrow(left, (c + (x - c) * 0.35 - 0.1, 2.53), (x - 0.12, 1.47), color=CPU)
    left.text(0.55, 2.15, "read", fontsize=8.5, color=CPU)
    left.text(4.6, 2.15, "update", fontsize=8.5, color=DEVICE)
    left.text(
        c,
        0.3,
        "each worker reads and updates when it is ready: nobody waits,\n"
        "updates can be stale; a dead worker is skipped",
        ha="center",
        fontsize=8.8,
    )
    right.text(c, 4.05, "All-reduce (synchronous)", ha="center", fontsize=12, weight="bold")
    right.text(
        c,
        3.72,
        "MirroredStrategy, MultiWorkerMirroredStrategy",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    xs = [0.8, c, 4.7]
    for x, k in zip(xs, range(3), strict=True):
        box(right, x, 2.0, 1.3, 0.8, f"replica {k}\nvariables", size=9)
    for a, b in [(0, 1), (1, 2)]:
        arrow(right, (xs[a] + 0.68, 2.0), (xs[b] - 0.68, 2.0), color=CPU, style="<|-|>", lw=1.8)
    right.annotate(
        "",
        xy=(xs[0], 2.43),
        xytext=(xs[2], 2.43),
        arrowprops=dict(
            arrowstyle="<|-|>",
            color=CPU,
            lw=1.8,
            connectionstyle="arc3,rad=0.35",
            shrinkA=2,
            shrinkB=2,
        ),
    )
    right.text(
        c,
        1.25,
        "sum the gradients (a ring or a tree),\nevery replica applies the same update",
        ha="center",
        fontsize=8.8,
        color=CPU,
    )
    right.text(
        c,
        0.3,
        "one update per step from every replica's batch: exact,\n"
        "but every step waits for the slowest; a dead replica stops it",
        ha="center",
        fontsize=8.8,
    )
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


FAIL = "#d62728"


def draw_client_server_target(fig_path: Path) -> None:
    """06: a client, a cluster of jobs and tasks, each task a server reached at its target."""
    fig, (ax,) = canvas(10.0, 4.3)
    ax.text(5.0, 4.05, "Client, server and target", ha="center", fontsize=12, weight="bold")
    client = [
        "the notebook's process:",
        "Session(target) (TF1) or",
        'tf.device("/job:worker/task:1")',
    ]
    _device(ax, 1.65, 2.25, client, label="client", color=CPU, w=2.9, h=1.05)
    # the cluster: one job, two tasks, each a server process at its own address
    region = FancyBboxPatch(
        (4.15, 0.75),
        5.65,
        2.95,
        boxstyle="round,pad=0.02,rounding_size=0.1",
        linewidth=1.2,
        linestyle="--",
        edgecolor=GREY,
        facecolor="none",
    )
    ax.add_patch(region)
    ax.text(4.3, 3.5, "cluster: a set of jobs", fontsize=9, style="italic", va="center")
    ax.text(4.3, 3.15, 'job "worker": a list of tasks', fontsize=9, style="italic", va="center")
    for y, k in [(2.5, 0), (1.35, 1)]:
        box(ax, 6.05, y, 2.3, 0.8, f"task {k}\na server process", size=9)
        ax.text(
            8.35,
            y,
            f"listens on\n127.0.0.1:P{k}\ntarget grpc://127.0.0.1:P{k}",
            ha="center",
            va="center",
            fontsize=8.3,
            family="DejaVu Sans Mono",
        )
    arrow(ax, (3.12, 2.05), (4.88, 1.45), color=CPU)
    ax.text(4.0, 2.2, "a graph or ops,\nsent to the target", fontsize=8.5, color=CPU, ha="center")
    arrow(ax, (4.88, 1.2), (3.12, 1.85), color=DEVICE)
    ax.text(3.75, 1.3, "results", fontsize=8.5, color=DEVICE, ha="center")
    note = (
        "a task is one server at one address; ops sent to task 1 run on its devices,"
        " /job:worker/replica:0/task:1/device:CPU:0.\ncreate_local_server() makes a one-task"
        " cluster (job localhost) inside the client's own process"
    )
    ax.text(5.0, 0.3, note, ha="center", va="center", fontsize=8.8, style="italic")
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_mirrored_variables(fig_path: Path) -> None:
    """09b: a MirroredVariable's copies, one gradient per replica, one all-reduce, one update."""
    fig, (ax,) = canvas(10.0, 4.9)
    ax.text(5.0, 4.65, "One step under MirroredStrategy", ha="center", fontsize=12, weight="bold")
    box(
        ax,
        5.0,
        4.05,
        4.6,
        0.5,
        "MirroredVariable w: one tf.Variable per replica (.values)",
        color=CPU,
        size=9,
    )
    xs = [1.7, 5.0, 8.3]
    for k, x in enumerate(xs):
        arrow(ax, (5.0 + (x - 5.0) * 0.45, 3.8), (x, 3.45), color=CPU)
        box(ax, x, 3.15, 2.2, 0.55, f"copy {k} of w, on device {k}", color=CPU, size=8.8)
        box(ax, x - 1.35, 2.25, 0.5, 0.5, f"share\n{k}", color=DATA, size=7.5)
        arrow(ax, (x - 1.08, 2.25), (x - 0.93, 2.25), color=DATA)
        box(
            ax,
            x + 0.2,
            2.25,
            2.2,
            0.6,
            f"replica {k}: forward, backward\n→ gradient g{k} of its share",
            size=8.3,
        )
        arrow(ax, (x, 2.85), (x, 2.58), color=CPU)
        arrow(ax, (x + 0.2, 1.93), (x + 0.2, 1.63), color=DEVICE)
        box(ax, x, 0.78, 2.2, 0.5, f"copy {k}: the optimizer's\nupdate with g", color=CPU, size=8.8)
    band = box(ax, 5.0, 1.4, 9.0, 0.42, "", color=DEVICE, fill=0.3)
    band.set_zorder(0)
    ax.text(
        5.0,
        1.4,
        "all-reduce: g = g0 + g1 + g2, the same sum on every replica, no central device",
        ha="center",
        va="center",
        fontsize=9,
        weight="bold",
    )
    for x in xs:
        arrow(ax, (x, 1.18), (x, 1.04), color=DEVICE)
    ax.text(
        5.0,
        0.2,
        "the same gradient applied to identical copies: the copies stay identical, step after step",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_run_and_reduce(fig_path: Path) -> None:
    """10: one custom-loop step: shares, strategy.run per replica, PerReplica, strategy.reduce."""
    fig, (ax,) = canvas(10.4, 4.4)
    title = "distributed_train_step: strategy.run, then strategy.reduce"
    ax.text(5.2, 4.15, title, ha="center", fontsize=12, weight="bold")
    box(ax, 0.95, 2.05, 1.5, 0.9, "global batch\nGLOBAL_BATCH\nexamples", color=DATA, size=8.8)
    frame = FancyBboxPatch(
        (2.55, 0.55),
        3.5,
        3.1,
        boxstyle="round,pad=0.02,rounding_size=0.1",
        linewidth=1.2,
        linestyle="--",
        edgecolor=GREY,
        facecolor="none",
    )
    ax.add_patch(frame)
    ax.text(
        4.3,
        3.45,
        "strategy.run(train_step, args=(batch,))",
        ha="center",
        fontsize=8.8,
        family="DejaVu Sans Mono",
    )
    ys = [2.75, 1.25]
    for k, y in enumerate(ys):
        arrow(ax, (1.72, 2.05), (2.95, y), color=DATA)
        box(
            ax,
            4.3,
            y,
            2.6,
            0.85,
            f"replica {k}: train_step(share {k})\nloss = sum / GLOBAL_BATCH\napply_gradients",
            size=8.5,
        )
        arrow(ax, (5.62, y), (6.75, 2.05), color=DEVICE)
    ax.text(2.2, 2.75, "share 0", fontsize=8.3, color=DATA, ha="center")
    ax.text(2.2, 1.3, "share 1", fontsize=8.3, color=DATA, ha="center")
    arrow(ax, (4.3, 2.3), (4.3, 1.7), color=CPU, style="<|-|>", lw=1.8)
    ax.text(4.42, 2.0, "all-reduce of\nthe gradients", fontsize=8.3, color=CPU, va="center")
    ax.text(4.3, 0.72, "one box per replica", ha="center", fontsize=8, style="italic")
    box(ax, 7.45, 2.05, 1.35, 0.9, "PerReplica:\none loss\nper replica", color=DEVICE, size=8.5)
    arrow(ax, (8.14, 2.05), (8.7, 2.05), color=CPU)
    box(ax, 9.5, 2.05, 1.5, 0.9, "one tensor:\nthe mean loss\nof the batch", color=CPU, size=8.5)
    ax.text(8.42, 2.6, "strategy.reduce\n(SUM, axis=None)", ha="center", fontsize=8.3, color=CPU)
    ax.text(1.95, 3.0, "distributed\ndataset", ha="center", fontsize=8.3, color=DATA)
    ax.text(
        5.2,
        0.2,
        "the whole step is one tf.function: traced once, with one copy of train_step per replica",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


RING_DEVICES = 4


def draw_ring_all_reduce(fig_path: Path) -> None:
    """09b: a ring all-reduce over N devices: chunks passed to the next device, twice N−1 steps."""
    n = RING_DEVICES
    fig, (ax,) = canvas(10.0, 4.6)
    ax.text(
        5.0,
        4.35,
        f"A ring all-reduce over N = {n} devices",
        ha="center",
        fontsize=12,
        weight="bold",
    )
    cx, cy, r = 2.3, 2.05, 1.35
    colours = [CPU, DEVICE, DATA, FAIL]
    angles = [np.pi / 2 - 2 * np.pi * k / n for k in range(n)]  # clockwise from the top
    points = [(cx + r * np.cos(a), cy + r * np.sin(a)) for a in angles]
    for k, (x, y) in enumerate(points):
        box(ax, x, y, 1.2, 0.62, "", color=colours[k], fill=0.12)
        ax.text(x, y + 0.14, f"device {k}", ha="center", va="center", fontsize=8.5, weight="bold")
        for c in range(n):  # its gradient, cut into n chunks
            box(ax, x - 0.36 + c * 0.24, y - 0.13, 0.18, 0.18, "", color=colours[k], fill=0.5)
    for k in range(n):
        a, b = np.array(points[k]), np.array(points[(k + 1) % n])
        d = (b - a) / np.linalg.norm(b - a)
        arrow(ax, tuple(a + d * 0.72), tuple(b - d * 0.72), color=TEXT, lw=1.6)
    ax.text(
        cx,
        cy,
        "each sends\nonly to the\nnext one",
        ha="center",
        va="center",
        fontsize=8.5,
        style="italic",
    )
    lines = [
        ("Each device cuts its gradient into N chunks.", "normal"),
        (f"1 · reduce-scatter, N − 1 = {n - 1} steps:", "bold"),
        ("every device sends one chunk to the next device, which adds", "normal"),
        ("it to its own; then each device holds the full sum of one chunk.", "normal"),
        (f"2 · all-gather, N − 1 = {n - 1} steps:", "bold"),
        ("the summed chunks go round the ring once more, until every", "normal"),
        ("device holds every summed chunk.", "normal"),
        ("In each step every link carries one chunk, all at once.", "normal"),
        (
            "Each device sends 2(N − 1)/N of its gradient: "
            f"{2 * (n - 1)}/{n} = {2 * (n - 1) / n:g} here, under 2 for any N.",
            "bold",
        ),
    ]
    y = 3.75
    for i, (text, weight) in enumerate(lines):
        if i and (weight == "bold" or i == len(lines) - 2):
            y -= 0.18  # a gap before each part
        ax.text(4.35, y, text, fontsize=9.2, weight=weight, va="center")
        y -= 0.3
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def ring_all_reduce_states(n: int) -> list[tuple[str, list[list[frozenset]], list[int]]]:
    """The ring all-reduce over n devices, step by step: (title, chunks, sent).

    chunks[d][c] is the set of devices whose chunk c device d has added up so far; sent[d]
    is the chunk device d sends to device d + 1 in the *next* step (-1: none)."""
    chunks = [[frozenset({d}) for _ in range(n)] for d in range(n)]
    states = []
    for s in range(n - 1):  # reduce-scatter: send chunk (d - s), the receiver adds
        sent = [(d - s) % n for d in range(n)]
        states.append(("start" if s == 0 else f"reduce-scatter {s}", [r[:] for r in chunks], sent))
        new = [r[:] for r in chunks]
        for d in range(n):
            c = sent[d]
            new[(d + 1) % n][c] = chunks[(d + 1) % n][c] | chunks[d][c]
        chunks = new
    for s in range(n - 1):  # all-gather: send the full chunk (d + 1 - s), the receiver copies
        sent = [(d + 1 - s) % n for d in range(n)]
        title = f"reduce-scatter {n - 1}" if s == 0 else f"all-gather {s}"
        states.append((title, [r[:] for r in chunks], sent))
        new = [r[:] for r in chunks]
        for d in range(n):
            new[(d + 1) % n][sent[d]] = chunks[d][sent[d]]
        chunks = new
    states.append((f"all-gather {n - 1}", chunks, [-1] * n))
    every = frozenset(range(n))
    assert all(c == every for row in chunks for c in row), "the ring must sum every chunk"
    return states


def draw_reduce_scatter_all_gather(fig_path: Path) -> None:
    """12: reduce-scatter then all-gather, chunk by chunk, for N = 3 devices."""
    n = 3
    states = ring_all_reduce_states(n)
    cw, ch, x0 = 1.78, 0.78, 1.05
    fig, (ax,) = canvas(x0 + cw * len(states) + 0.1, 4.5)
    top = 3.55
    ax.text(
        x0 + cw * len(states) / 2,
        4.25,
        f"Ring all-reduce of N = {n} devices, chunk by chunk: what each device holds"
        " after each step",
        ha="center",
        fontsize=11,
        weight="bold",
    )
    for j, (title, chunks, sent) in enumerate(states):
        xc = x0 + cw * (j + 0.5)
        ax.text(xc, top + 0.25, title, ha="center", fontsize=8.8, weight="bold")
        for d in range(n):
            y = top - 0.3 - d * ch
            for c in range(n):
                have = chunks[d][c]
                full = len(have) == n
                label = "Σ" if full else "+".join(str(k) for k in sorted(have))
                patch = box(
                    ax,
                    xc - 0.52 + c * 0.52,
                    y,
                    0.46,
                    0.42,
                    label,
                    color=DEVICE if full else CPU,
                    fill=0.1 + 0.5 * (len(have) - 1) / (n - 1),
                    size=8,
                    weight="bold" if full else "normal",
                )
                if sent[d] == c:
                    patch.set_linewidth(2.6)
                    patch.set_edgecolor(TEXT)
    for d in range(n):
        ax.text(0.08, top - 0.3 - d * ch, f"device {d}", fontsize=9, va="center", weight="bold")
    ax.text(0.08, top + 0.25, "chunks 0, 1, 2", fontsize=8.3, style="italic")
    rs_end = x0 + cw * n
    ax.plot(
        [rs_end, rs_end], [top - 0.3 - (n - 1) * ch - 0.35, top + 0.45], color=GREY, lw=1.2, ls="--"
    )
    ypos = top - 0.3 - (n - 1) * ch - 0.6
    ax.text(
        x0 + cw * n / 2,
        ypos,
        f"reduce-scatter: {n - 1} steps, the receiver adds",
        ha="center",
        fontsize=9,
        color=CPU,
    )
    ax.text(
        x0 + cw * (n + (n - 1) / 2),
        ypos,
        f"all-gather: {n - 1} steps, the receiver copies",
        ha="center",
        fontsize=9,
        color=DEVICE,
    )
    note = (
        "0+1: the sum of devices 0 and 1's values of that chunk; Σ: the sum over every device.\n"
        "Outlined: the chunk a device sends to the next device in the following step"
        " (device 2 sends to device 0).\n"
        "Each step every device sends one chunk, 1/N of the gradient; "
        f"2(N − 1) = {2 * (n - 1)} steps: 2(N − 1)/N = {2 * (n - 1)}/{n} of the gradient in all."
    )
    ax.text(0.08, 0.35, note, fontsize=8.6, style="italic", va="center")
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_workers_and_chief(fig_path: Path) -> None:
    """11: MultiWorkerMirroredStrategy's workers: chief, coordination service, heartbeats and
    checkpoint folders."""
    fig, (ax,) = canvas(10.0, 4.9)
    ax.text(5.0, 4.65, "Two workers, one program", ha="center", fontsize=12, weight="bold")
    ax.text(
        5.0,
        4.3,
        "each started with its own TF_CONFIG: the same cluster, its own task",
        ha="center",
        fontsize=9,
        style="italic",
    )
    _device(
        ax,
        2.3,
        3.0,
        ["the program; a copy of", "every variable"],
        label="worker 0: the chief",
        color=CPU,
        w=2.8,
        h=0.8,
    )
    _device(
        ax, 7.7, 3.0, ["the program; a copy of", "every variable"], label="worker 1", w=2.8, h=0.8
    )
    arrow(ax, (3.75, 3.05), (6.25, 3.05), color=CPU, style="<|-|>", lw=1.8)
    ax.text(5.0, 3.25, "all-reduce of the gradients,", ha="center", fontsize=8.5, color=CPU)
    ax.text(5.0, 2.83, "every step", ha="center", fontsize=8.5, color=CPU)
    box(
        ax,
        2.3,
        1.95,
        2.5,
        0.6,
        "coordination service\n(runs in the chief)",
        color=CPU,
        fill=0.3,
        size=8.8,
    )
    arrow(ax, (2.3, 2.58), (2.3, 2.27), color=FAIL, ls="--")
    arrow(ax, (7.2, 2.58), (3.58, 2.05), color=FAIL, ls="--")
    ax.text(5.6, 2.05, "heartbeats", fontsize=8.8, color=FAIL, ha="center", rotation=0)
    ax.text(
        5.6,
        1.6,
        "none for 10 s: the service declares the worker\n"
        "dead and aborts every worker's collectives",
        fontsize=8.3,
        color=FAIL,
        ha="center",
        va="center",
    )
    box(
        ax,
        2.3,
        0.65,
        2.9,
        0.55,
        "checkpoint folder: the real one,\nrestored by every worker on restart",
        color=DATA,
        size=8.3,
    )
    box(
        ax,
        7.7,
        0.65,
        2.9,
        0.55,
        "a temporary folder of its own,\nwhich nobody reads",
        color=GREY,
        size=8.3,
    )
    arrow(ax, (0.85, 2.6), (0.85, 0.95), color=DATA)
    ax.text(0.75, 1.4, "save", fontsize=8.5, color=DATA, ha="right")
    arrow(ax, (9.15, 2.6), (9.15, 0.95), color=GREY)
    ax.text(9.25, 1.4, "save", fontsize=8.5, color=TEXT)
    ax.text(
        5.0,
        0.1,
        "every worker calls save (it may run collective ops); only the chief's copy counts",
        ha="center",
        fontsize=8.8,
        style="italic",
    )
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


#: Notebook 11b's defaults, which the timeline shows.
TIMELINE = dict(steps=40, checkpoint_every=10, fail_at=25)


def draw_failure_timeline(fig_path: Path) -> None:
    """11b: kill → detect → restart → resume, on the step axis, with notebook 11b's defaults."""
    steps, every, fail = TIMELINE["steps"], TIMELINE["checkpoint_every"], TIMELINE["fail_at"]
    saved = fail // every * every
    fig, (ax,) = canvas(11.0, 4.7)
    x0, k = 1.7, 0.215  # x of step 0, inches per step

    def x(step):
        return x0 + k * step

    ax.text(5.5, 4.45, "Kill → detect → restart → resume", ha="center", fontsize=12, weight="bold")
    lanes = [(3.55, "first run", 0), (3.15, "", 1), (1.55, "after the restart", 0), (1.15, "", 1)]
    for y, run, w in lanes:
        if run:
            ax.text(0.1, y + 0.35, run, fontsize=9, weight="bold", va="center")
        ax.text(0.1, y, f"worker {w}" + (" (chief)" if w == 0 else ""), fontsize=8.5, va="center")
    for y in (3.55, 3.15):  # first run: steps 1..fail, then the chief starts step fail + 1
        ax.broken_barh([(x(0), x(fail) - x(0))], (y - 0.12, 0.24), color=CPU, alpha=0.35)
    ax.broken_barh([(x(fail), k * 0.6)], (3.55 - 0.12, 0.24), color=FAIL, alpha=0.35)
    for s in range(every, fail + 1, every):
        ax.plot([x(s)] * 2, [3.0, 3.72], color=DATA, lw=1.6)
        ax.text(x(s), 3.82, f"ckpt-{s}", ha="center", fontsize=8, color=DATA)
    ax.text(
        x(fail),
        2.75,
        f"1 · kill: worker 1\nafter step {fail}",
        ha="center",
        fontsize=8.5,
        color=FAIL,
    )
    ax.plot(x(fail) + 0.02, 3.15, marker="x", color=FAIL, markersize=11, mew=2.5)
    ax.text(
        x(fail) + 0.4,
        3.55,
        f"2 · detect: worker 0, in step {fail + 1}, gets UnavailableError\n"
        "in a fraction of a second (a frozen worker: a heartbeat\n"
        "error after about 10 s); the process must exit",
        fontsize=8.5,
        color=FAIL,
        va="center",
    )
    ax.annotate(
        "",
        xy=(x(saved), 1.78),
        xytext=(x(fail) + 0.1, 2.45),
        arrowprops=dict(arrowstyle="-|>", color=TEXT, lw=1.3, connectionstyle="arc3,rad=-0.2"),
    )
    ax.text(
        x(saved) - 0.25,
        2.3,
        f"3 · restart both workers: each restores ckpt-{saved} (step {saved}, its weights)\n"
        f"and skips the {saved} batches already trained on",
        fontsize=8.5,
        va="center",
        ha="right",
    )
    for y in (1.55, 1.15):
        ax.broken_barh([(x(saved), x(fail) - x(saved))], (y - 0.12, 0.24), color=DEVICE, alpha=0.45)
        ax.broken_barh([(x(fail), x(steps) - x(fail))], (y - 0.12, 0.24), color=CPU, alpha=0.35)
    ax.text(
        (x(saved) + x(fail)) / 2,
        0.78,
        f"steps {saved + 1}–{fail}\ntrained twice",
        ha="center",
        fontsize=8.3,
        color=DEVICE,
        va="center",
    )
    ax.text(
        x(steps),
        0.85,
        f"4 · resume: to step {steps},\nweights as without the failure",
        ha="right",
        fontsize=8.5,
        va="center",
    )
    for s in range(0, steps + 1, 5):
        ax.text(x(s), 0.28, str(s), ha="center", fontsize=8, color=TEXT)
    ax.plot([x(0), x(steps)], [0.45, 0.45], color=GREY, lw=1)
    ax.text(x0 - 0.15, 0.28, "step", ha="right", fontsize=8, style="italic")
    fig.savefig(fig_path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


#: Every image this script draws: file name in images/ -> drawing function.
DIAGRAMS: dict[str, Callable[[Path], None]] = {
    "01_mask_to_visible.png": draw_mask_to_visible,
    "03_tower_step.png": draw_tower_step,
    "03_model_vs_data_parallel.png": draw_model_vs_data_parallel,
    "03_parameter_layouts.png": draw_parameter_layouts,
    "07_cluster_layout.png": draw_cluster_layout,
    "08_ps_vs_allreduce.png": draw_ps_vs_allreduce,
    "06_client_server_target.png": draw_client_server_target,
    "09_mirrored_variables.png": draw_mirrored_variables,
    "09_ring_all_reduce.png": draw_ring_all_reduce,
    "10_run_and_reduce.png": draw_run_and_reduce,
    "11_workers_and_chief.png": draw_workers_and_chief,
    "11_failure_timeline.png": draw_failure_timeline,
    "12_reduce_scatter_all_gather.png": draw_reduce_scatter_all_gather,
}


# --------------------------------------------------------------------------- driver


def draw_all(out_dir: Path) -> list[Path]:
    """Draw every diagram into ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with matplotlib.rc_context(STYLE):
        for name, draw in DIAGRAMS.items():
            path = out_dir / name
            draw(path)
            written.append(path)
    return written


def _pixels(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"))


def compare(expected_dir: Path, drawn_dir: Path) -> list[str]:
    """Problems found comparing ``drawn_dir`` (fresh) with ``expected_dir`` (committed)."""
    problems = []
    for name in DIAGRAMS:
        committed, fresh = expected_dir / name, drawn_dir / name
        if not committed.exists():
            problems.append(f"{name}: missing from {expected_dir.name}/")
            continue
        a, b = _pixels(committed), _pixels(fresh)
        if a.shape != b.shape:
            problems.append(
                f"{name}: size {a.shape[1]}x{a.shape[0]}, drawn {b.shape[1]}x{b.shape[0]}"
            )
        elif not np.array_equal(a, b):
            changed = int(np.any(a != b, axis=-1).sum())
            problems.append(f"{name}: {changed} pixels differ from a fresh drawing")
    if expected_dir.is_dir():
        for extra in sorted(expected_dir.glob("*.png")):
            if extra.name not in DIAGRAMS:
                problems.append(
                    f"{extra.name}: not drawn by tools/draw_images.py (add it to DIAGRAMS)"
                )
    return problems


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.draw_images", description="Draw the course's diagrams into images/."
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="redraw into a temporary folder and compare with images/; exit 1 on a difference",
    )
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder to draw into or check")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.check:
        for path in draw_all(args.out):
            print(f"drew {path.name}")
        return 0
    with tempfile.TemporaryDirectory(prefix="dtf-images-") as tmp:
        draw_all(Path(tmp))
        problems = compare(args.out, Path(tmp))
    if problems:
        for problem in problems:
            print(f"images out of date: {problem}", file=sys.stderr)
        print("fix: python -m tools.draw_images, then commit images/", file=sys.stderr)
        return 1
    print(f"{len(DIAGRAMS)} images up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
