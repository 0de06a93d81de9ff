"""Throughput measurements for notebook 12, each configuration in a fresh process.

Several ``MirroredStrategy`` instances with different device counts cannot live in one process
(their collective all-reduces share a process-wide registry of groups: "... is joining a group
with size 4, but that group has size 2 ... Restart your program", tensorflow#62790), and thread
settings must be made before TensorFlow initialises. So each measurement is a command that a
notebook runs in a child process, printing one JSON line::

    python -m dtf.scaling mirrored --replicas 2 --per-device-batch 128 --hidden 512
    python -m dtf.scaling chains

:func:`throughput` is the timing rule of notebook 12: ``warmup`` untimed steps (tracing,
placement, first allocations), then ``repeats`` timings of ``timed`` steps each, waiting for the
last step's result, since TensorFlow runs ops asynchronously.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence


def throughput(
    step: Callable, batch: Sequence, examples_per_step: int, warmup: int, timed: int, repeats: int
) -> list[float]:
    """Examples per second of ``step(*batch)``, one value per repeat, warm-up excluded."""
    for _ in range(warmup):
        step(*batch).numpy()
    rates = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(timed):
            result = step(*batch)
        result.numpy()  # wait for the last step to finish
        rates.append(timed * examples_per_step / (time.perf_counter() - began))
    return rates


def mirrored(args: argparse.Namespace) -> dict:
    """Throughput of notebook 10's standard MirroredStrategy step over ``args.replicas``
    devices: model and optimizer built in the scope, the batch split by
    ``experimental_distribute_dataset``, the optimizer all-reducing the gradients."""
    import keras
    import numpy as np
    import tensorflow as tf

    from dtf import data, devices, towers

    n, per_device = args.replicas, args.per_device_batch
    strategy = tf.distribute.MirroredStrategy(list(devices.setup(n).names))
    digits = data.load("digits", flatten=True, seed=args.seed)
    idx = np.random.default_rng(args.seed).integers(0, len(digits.x_train), per_device * n)
    images = tf.data.Dataset.from_tensor_slices((digits.x_train[idx], digits.y_train[idx]))
    batch = next(iter(strategy.experimental_distribute_dataset(images.batch(per_device * n))))
    with strategy.scope():
        params = towers.init_mlp(digits.input_shape[0], args.hidden, 10, seed=args.seed)
        variables = [params[k] for k in towers.MLP_VARIABLES]
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(variables)

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = towers.mlp_logits(params, x)
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=per_device * n)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    @tf.function
    def step(x, y):
        return strategy.reduce("SUM", strategy.run(replica_step, args=(x, y)), axis=None)

    rates = throughput(step, batch, per_device * n, args.warmup, args.timed, args.repeats)
    ops = type(strategy.extended._cross_device_ops).__name__  # what the strategy picked
    return {"replicas": n, "rates": rates, "cross_device_ops": ops}


def chains(args: argparse.Namespace) -> dict:
    """Seconds for one chain of small matmuls on one logical CPU, and for two independent
    chains on two, with one intra-op thread per op (the best of ``args.repeats``)."""
    import tensorflow as tf

    from dtf import devices

    tf.config.threading.set_intra_op_parallelism_threads(1)  # before TensorFlow initialises
    names = devices.setup(2).names
    x = tf.random.stateless_normal([args.size, args.size], seed=[1, 2])

    def chain(device):
        with tf.device(device):
            h = x
            for _ in range(args.length):
                h = tf.tanh(tf.matmul(h, x) * 0.01)
            return h

    one = tf.function(lambda: [chain(names[0])])
    two = tf.function(lambda: [chain(names[0]), chain(names[1])])

    def best(fn) -> float:
        fn()  # trace
        times = []
        for _ in range(args.repeats):
            began = time.perf_counter()
            [t.numpy() for t in fn()]
            times.append(time.perf_counter() - began)
        return min(times)

    return {"one chain": best(one), "two chains": best(two)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dtf.scaling", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="what", required=True)
    m = sub.add_parser("mirrored", help="MirroredStrategy throughput for one replica count")
    m.add_argument("--replicas", type=int, required=True)
    m.add_argument("--per-device-batch", type=int, default=128)
    m.add_argument("--hidden", type=int, default=512)
    m.add_argument("--warmup", type=int, default=5)
    m.add_argument("--timed", type=int, default=20)
    m.add_argument("--repeats", type=int, default=3)
    m.add_argument("--seed", type=int, default=42)
    c = sub.add_parser("chains", help="one vs two independent matmul chains")
    c.add_argument("--size", type=int, default=256)
    c.add_argument("--length", type=int, default=40)
    c.add_argument("--repeats", type=int, default=7)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from dtf import quiet

    quiet.quiet()
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    result = mirrored(args) if args.what == "mirrored" else chains(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
