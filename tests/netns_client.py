"""A TensorFlow client for ``tests/test_netns.py``, run inside a host (``ip netns exec``).

``python netns_client.py MODE REQUEST_JSON``; it writes one JSON object per line to standard
output, each with an ``event``:

- ``ops``: join ``spec`` as ``host/0`` (TF2 ``connect_to_cluster``), run the post's matmul on
  every worker with ``tf.device``; one ``result`` event.
- ``stranger``: a process outside the cluster opens a TF1 ``Session(target)`` on one worker
  and runs an op there; one ``result`` event.
- ``loop``: join ``spec`` as ``host/0`` (with the course's keepalive defaults when
  ``keepalive`` is true), then run a small op on ``device`` every 50 ms until one fails: an
  ``op`` event per op, then an ``error`` event (type, first line, ``time.monotonic()``).
- ``tf1loop``: the same with a TF1 ``Session(target)`` and ``RunOptions(timeout_in_ms=...)``.

It imports TensorFlow without Keras (as the course's server does: half the import time).
"""

from __future__ import annotations

import json
import os
import sys
import time

MATRIX = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)


def first_line(exc: BaseException) -> str:
    """The first line of the message that says more than "Graph execution error:"."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.endswith("execution error:")]
    return (useful or lines or [""])[0][:300]


def main() -> None:
    mode, request = sys.argv[1], json.loads(sys.argv[2])
    if request.get("keepalive"):
        from dtf.cluster import apply_grpc_options

        apply_grpc_options()  # before the first connection
    from dtf.server import import_tensorflow

    tf = import_tensorflow()
    emit("imported", grpc_options=os.environ.get("TF_GRPC_DEFAULT_OPTIONS", ""))
    if mode in ("ops", "loop"):
        spec = tf.train.ClusterSpec(request["spec"])
        tf.config.experimental_connect_to_cluster(spec, job_name="host", task_index=0)
    if mode == "ops":
        results = {}
        for index in range(len(request["spec"]["worker"])):
            with tf.device(f"/job:worker/task:{index}"):
                a = tf.constant(MATRIX, shape=[2, 3])
                b = tf.constant(MATRIX, shape=[3, 2])
                c = tf.matmul(a, b)
            results[index] = [c.numpy().tolist(), c.device]
        emit("result", workers=results, devices=[d.name for d in tf.config.list_logical_devices()])
    elif mode == "stranger":
        config = tf.compat.v1.ConfigProto(device_filters=[request["device"]])
        with tf.Graph().as_default():
            with tf.device(request["device"]):
                c = tf.matmul(tf.constant(MATRIX, shape=[2, 3]), tf.constant(MATRIX, shape=[3, 2]))
            with tf.compat.v1.Session(request["target"], config=config) as sess:
                options = tf.compat.v1.RunOptions(timeout_in_ms=30_000)
                emit("result", value=sess.run(c, options=options).tolist())
    elif mode == "loop":
        n = 0
        while True:
            began = time.monotonic()
            try:
                with tf.device(request["device"]):
                    value = float(tf.reduce_sum(tf.ones([2, 2]) * n).numpy())
            except tf.errors.OpError as exc:
                emit("error", type=type(exc).__name__, message=first_line(exc), began=began)
                break
            n += 1
            emit("op", n=n, value=value)
            time.sleep(0.05)
    elif mode == "tf1loop":
        config = tf.compat.v1.ConfigProto(device_filters=[request["device"]])
        with tf.Graph().as_default():
            step = tf.compat.v1.placeholder(tf.float32, [])
            with tf.device(request["device"]):
                total = tf.reduce_sum(tf.ones([2, 2]) * step)
            sess = tf.compat.v1.Session(request["target"], config=config)
            options = tf.compat.v1.RunOptions(timeout_in_ms=request["timeout_ms"])
            n = 0
            while True:
                began = time.monotonic()
                try:
                    value = float(sess.run(total, {step: n}, options=options))
                except tf.errors.OpError as exc:
                    emit("error", type=type(exc).__name__, message=first_line(exc), began=began)
                    break
                n += 1
                emit("op", n=n, value=value)
                time.sleep(0.05)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    sys.stdout.flush()
    os._exit(0)  # do not wait for an eager context or a session whose worker is cut off


if __name__ == "__main__":
    main()
