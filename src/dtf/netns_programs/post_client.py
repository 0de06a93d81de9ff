# GENERATED from notebooks/13_hosts_on_one_machine.ipynb by `python -m tools.export` (`make export`): do not edit here.
# The notebook's cells tagged `export:dtf/netns_programs/post_client.py` are the source: change them there, run
# the cells, then the command above; tests/test_export.py fails while this file is stale.

# The post's host program in TensorFlow 2: task host/0 places ops on the two workers.
import json
import sys

from dtf.server import import_tensorflow

tf = import_tensorflow()  # TensorFlow without Keras

cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
# This process's own server, as host/0; every task's devices become visible here.
tf.config.experimental_connect_to_cluster(cluster, job_name="host", task_index=0)
with tf.device("/job:worker/task:0"):
    a = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[2, 3], name="a")
    b = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[3, 2], name="b")
    c = tf.matmul(a, b)
with tf.device("/job:worker/task:1"):
    d = tf.matmul(a, b) + tf.math.log(100 + c)
seen = {"c": c.numpy().tolist(), "c_device": c.device, "d": d.numpy().tolist()}
seen["d_device"] = d.device
seen["devices"] = [device.name for device in tf.config.list_logical_devices()]
print(json.dumps(seen))
