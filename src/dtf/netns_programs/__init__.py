"""The TensorFlow programs of notebook 13 that run inside its hosts (network namespaces).

Each module here is GENERATED from notebook 13's cells tagged ``export:dtf/netns_programs/...``
by ``python -m tools.export``: the notebook writes the same cells to files with ``%%writefile``
and runs them in its hosts, and the course's tests (``tests/test_netns.py``) run these copies
(``python -m dtf.netns_programs.eager_loop ...``). Edit the notebook, never these files.

- ``post_client``: the post's host program in TensorFlow 2, as ``host/0``: ``tf.device`` ops on
  both workers; prints what it got as one line of JSON.
- ``stranger``: a process that is no task of the cluster runs ops on a worker's server (TF1
  ``Session``), reading ``/proc/self`` there.
- ``eager_loop``: a TF2 client that runs a small op on ``worker/1`` every 50 ms, with the gRPC
  options of its second argument (keepalive) or none.
- ``tf1_loop``: the same with a TF1 ``Session`` and a ``RunOptions(timeout_in_ms=...)`` deadline.
"""
