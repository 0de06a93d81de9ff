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

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

# Run as a file (`python tools/draw_images.py`), not as `python -m tools.draw_images`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.nbtools import REPO_ROOT as ROOT  # noqa: E402  (puts src/ on the path if needed)

# isort: split
from dtf import masking  # noqa: E402  (after tools.nbtools, which can make it importable)

IMAGES = ROOT / "images"
DPI = 100
STYLE = {
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
    """03: where the variables of a data-parallel step live, and what travels each step."""
    fig, axes = canvas(12.0, 4.4, ncols=3)
    titles = [
        ("Parameters on the CPU", "cifar10_multi_gpu_train.py; notebook 03, section 5"),
        ("Parameters spread over the devices", "notebook 03, section 7"),
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
            "a server process\n(python -m dtf.server)",
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


#: Every image this script draws: file name in images/ -> drawing function.
DIAGRAMS: dict[str, Callable[[Path], None]] = {
    "01_mask_to_visible.png": draw_mask_to_visible,
    "03_tower_step.png": draw_tower_step,
    "03_model_vs_data_parallel.png": draw_model_vs_data_parallel,
    "03_parameter_layouts.png": draw_parameter_layouts,
    "07_cluster_layout.png": draw_cluster_layout,
    "08_ps_vs_allreduce.png": draw_ps_vs_allreduce,
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
