# GENERATED from notebooks/13_hosts_on_one_machine.ipynb by `python -m tools.export` (`make export`): do not edit here.
# The notebook's cells tagged `export:dtf/netns_programs/tf1_loop.py` are the source: change them there, run
# the cells, then the command above; tests/test_export.py fails while this file is stale.

# A TF1 client of worker1's server: every run has a deadline; each reported as JSON.
import json
import os
import sys
import time

from dtf.server import import_tensorflow

tf = import_tensorflow()


def report(event, **fields):
    print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)


target, timeout_ms, device = sys.argv[1], int(sys.argv[2]), "/job:worker/task:1"
with tf.Graph().as_default():
    n = tf.compat.v1.placeholder(tf.float32, [])
    with tf.device(device):
        total = tf.reduce_sum(tf.ones([2, 2]) * n)
    sess = tf.compat.v1.Session(target, config=tf.compat.v1.ConfigProto(device_filters=[device]))
    options = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms)  # a deadline for every run
    report("connected")
    for step in range(10**6):
        began = time.monotonic()
        try:
            sess.run(total, {n: step}, options=options)
        except tf.errors.OpError as err:  # e.g. DeadlineExceededError
            report("error", type=type(err).__name__, message=str(err)[:1000], began=began)
            break
        report("op", n=step)
        time.sleep(0.05)
os._exit(0)  # exit at once: do not wait to close a session whose worker is cut off
