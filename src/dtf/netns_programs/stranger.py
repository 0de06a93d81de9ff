# GENERATED from notebooks/13_hosts_on_one_machine.ipynb by `python -m tools.export` (`make export`): do not edit here.
# The notebook's cells tagged `export:dtf/netns_programs/stranger.py` are the source: change them there, run
# the cells, then the command above; tests/test_export.py fails while this file is stale.

# No task of the cluster: it knows an address, and runs two ops on that task's server.
import json
import os
import sys

from dtf.server import import_tensorflow

tf = import_tensorflow()

target, device = sys.argv[1], sys.argv[2]  # "grpc://<worker1's address>:2222", its device
with tf.Graph().as_default():
    with tf.device(device):  # run by the server there
        status = tf.io.read_file("/proc/self/status")
        command = tf.io.read_file("/proc/self/cmdline")
    config = tf.compat.v1.ConfigProto(device_filters=[device])  # talk to that task only
    with tf.compat.v1.Session(target, config=config) as sess:
        options = tf.compat.v1.RunOptions(timeout_in_ms=30_000)
        status, command = sess.run([status, command], options=options)
seen = {"me": os.getpid(), "status": status.decode(), "cmdline": command.decode()}
print(json.dumps(seen))
