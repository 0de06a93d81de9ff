# GENERATED from notebooks/13_hosts_on_one_machine.ipynb by `python -m tools.export` (`make export`): do not edit here.
# The notebook's cells tagged `export:dtf/netns_programs/eager_loop.py` are the source: change them there, run
# the cells, then the command above; tests/test_export.py fails while this file is stale.

# A TF2 client as host/0: a small op on worker/1 every 50 ms, each reported as JSON.
import json
import os
import sys
import time

from dtf.server import import_tensorflow

if sys.argv[2]:  # gRPC options, e.g. keepalive: read once, at the first connection
    os.environ["TF_GRPC_DEFAULT_OPTIONS"] = sys.argv[2]
tf = import_tensorflow()


def report(event, **fields):
    print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)


cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
tf.config.experimental_connect_to_cluster(cluster, job_name="host", task_index=0)
report("connected", grpc=os.environ.get("TF_GRPC_DEFAULT_OPTIONS", ""))
for n in range(10**6):
    began = time.monotonic()
    try:
        with tf.device("/job:worker/task:1"):
            tf.reduce_sum(tf.ones([2, 2]) * n).numpy()
    except tf.errors.OpError as err:  # e.g. UnavailableError
        report("error", type=type(err).__name__, message=str(err)[:1000], began=began)
        break
    report("op", n=n)
    time.sleep(0.05)
os._exit(0)  # exit at once: do not wait for a context whose worker is cut off
