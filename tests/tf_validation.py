"""TensorFlow's own verdict on ``TF_CONFIG`` texts, in a fresh interpreter (the test modules
that use it import no TensorFlow; mark their tests ``slow``).

Each text goes into ``TF_CONFIG``, ``tf.distribute.cluster_resolver.TFConfigClusterResolver``
reads it, and ``multi_worker_util._validate_cluster_spec`` (what ``MultiWorkerMirroredStrategy``
and ``ParameterServerStrategy`` run on it) checks the cluster and the task.
"""

from __future__ import annotations

import json

from .helpers import last_json, run_script

#: What TensorFlow says of a cluster spec with a job no strategy accepts (such as ``host``).
DISALLOWED = "Disallowed task type found in cluster spec"

_SCRIPT = """
import json, os
import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util

verdicts = {}
for name, text in json.loads(CONFIGS).items():
    os.environ["TF_CONFIG"] = text
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    try:
        multi_worker_util._validate_cluster_spec(
            resolver.cluster_spec(), resolver.task_type, resolver.task_id
        )
        verdicts[name] = None
    except ValueError as exc:
        verdicts[name] = str(exc)
print(json.dumps(verdicts))
"""


def tensorflow_verdicts(configs: dict[str, str]) -> dict[str, str | None]:
    """For each named ``TF_CONFIG`` text, ``None`` if TensorFlow accepts it, else its message."""
    return last_json(run_script(f"CONFIGS = {json.dumps(configs)!r}\n" + _SCRIPT, forked=True))
