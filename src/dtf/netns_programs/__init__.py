"""The TensorFlow programs of notebook 13 (parts 13, 13b, 13c) that run in its hosts (namespaces).

Each module is GENERATED from the cells tagged ``export:dtf/netns_programs/...`` of one part (its
header names it) by ``python -m tools.export``: the notebook writes the same cells to files with
``%%writefile`` and runs them in its hosts, and the course's tests (``tests/test_netns.py``) run
these copies (``python -m dtf.netns_programs.eager_loop ...``). Edit the notebook, never these
files.

- ``post_client`` (13): the post's host program in TensorFlow 2, as ``host/0``: ``tf.device`` ops
  on both workers; prints what it got as one line of JSON.
- ``stranger`` (13c): a process that is no task of the cluster runs ops on a worker's server (TF1
  ``Session``), reading ``/proc/self`` there.
- ``eager_loop`` (13b): a TF2 client that runs a small op on ``worker/1`` every 50 ms, with the
  gRPC options of its second argument (keepalive) or none.
- ``tf1_loop`` (13b): the same with a TF1 ``Session`` and a ``RunOptions(timeout_in_ms=...)``
  deadline.
"""
