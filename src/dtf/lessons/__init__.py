"""GENERATED modules: the lessons' own code, copied from the notebooks' cells.

Every module here (and nothing else) is written by ``python -m tools.export`` (``make export``)
from the code cells whose first line (after a ``%%writefile`` line) is a marker::

    # export: dtf/lessons/NAME.py

The notebook is the source, where the learner reads, runs and changes the code; the copy lets
the course's plumbing, its tests and its worker processes use the same lines. Edit the
notebook, never these files (tests/test_export.py fails on a stale copy).

=================  ====  ===========================================================
module             part  what it holds
=================  ====  ===========================================================
model_parallel     04    each stage's forward and backward pass on its own tape
pipeline           04b   micro-batches (GPipe), SGD, data-parallel gradients and steps
cnn                09    the source's CNN, seeded: the same weights for the same seed
worker_program     11    the MultiWorkerMirroredStrategy program every worker runs
shard_worker       11d   one worker that records which input records it read
scaling_steps      12    the interleaved timing loop (seconds per step)
scaling_mirrored   12    MirroredStrategy's seconds per step for one number of replicas
trace_reading      12b   a trace's ops, their kinds and a step's breakdown
scaling_chains     12e   one chain of small matmuls against two
post_client        13    the TF2 client on host/0 of the namespace cluster
eager_loop         13b   a TF2 client looping on worker/1, with or without keepalive
tf1_loop           13b   the same with a TF1 Session and a RunOptions deadline
stranger           13c   a process outside the cluster running ops on a worker's server
=================  ====  ===========================================================

Programs run as ``python -m dtf.lessons.NAME ...`` (tests/test_netns.py, dtf.scaling).
"""
