"""The TensorFlow a lesson teaches stands in its notebook's own code cells (issue 17): the
learner reads, runs and changes it there. ``dtf`` may hold the same code only as a copy the
notebook writes (``tools/export.py``) or as plumbing around it."""

from __future__ import annotations

import nbformat
import pytest

from tests.helpers import ROOT

#: Per tutorial, the APIs its lesson is about; each must appear in a code cell (not only in prose).
LESSON_APIS = {
    "02b_soft_placement_and_tf1": [
        "tf.config.set_soft_device_placement(",
        "tf.DeviceSpec.from_string(",
        "tf.compat.v1.ConfigProto(",
    ],
    "03_manual_placement_and_towers": ["tf.device(", "tf.add_n(", "tf.Variable("],
    "03b_towers_by_hand": ["tf.device(", "tf.GradientTape()", "tf.add_n(", "tf.split("],
    "04_model_data_pipeline_parallelism": ["tf.GradientTape(", "output_gradients=", "tf.device("],
    "04b_pipeline_and_data_parallelism": [
        "tf.split(",
        "tf.add_n(",
        "tf.GradientTape(",
        "tf.device(",
    ],
    "04c_parallelism_side_by_side": [
        "make_data_parallel_step(",
        "make_pipeline_step(",
        "parameter_bytes(",
    ],
    "06_local_server": [
        "tf.train.ClusterSpec(",
        "tf.distribute.Server(",
        "job_name=",
        "task_index=",
    ],
    "07_remote_servers": ["tf.train.ClusterSpec(", "tf.distribute.Server(", "tf.device("],
    "08_parameter_servers_sync_async": ["ParameterServerStrategy(", "ClusterCoordinator("],
    "08b_parameter_server_failures": [
        "ParameterServerStrategy(",
        "ClusterCoordinator(",
        "tf.train.CheckpointManager(",
    ],
    "09_mirrored_strategy_keras": ["tf.distribute.MirroredStrategy(", "strategy.scope()", ".fit("],
    "09b_mirrored_strategy_under_the_hood": [
        ".value.values",
        "get_replica_context()",
        "all_reduce(",
        "tf.distribute.MirroredStrategy(",
    ],
    "10_mirrored_strategy_custom_loop": ["strategy.run(", "tf.nn.compute_average_loss("],
    "10b_towers_equal_mirrored_and_checkpoints": [
        "strategy.run(",
        "tf.train.Checkpoint(",
        "assert_consumed()",
    ],
    "11_multi_worker_and_fault_tolerance": [
        "tf.distribute.MultiWorkerMirroredStrategy(",
        "tf.train.CheckpointManager(",
        "PreemptionCheckpointHandler(",
        "TF_CONFIG",
    ],
    "11b_killed_and_hung_workers": [
        "tf.train.latest_checkpoint(",
        "tf.train.Checkpoint(",
        "tf.train.load_variable(",
    ],
    "11c_preemption_and_keras_backup": [
        "keras.callbacks.BackupAndRestore(",
        "tf.distribute.MirroredStrategy(",
        "signal.SIGTERM",
    ],
    "11d_input_sharding": [
        "tf.data.experimental.AutoShardPolicy",
        "auto_shard_policy =",
        "experimental_distribute_dataset(",
    ],
    "11e_sharding_by_hand_and_pitfalls": [
        "distribute_datasets_from_function(",
        "input_context.",
        "tf.distribute.InputOptions(",
    ],
    "12b_profiling_steps": [
        "tf.profiler.experimental.start(",
        "tf.profiler.experimental.stop()",
        "tf.profiler.experimental.Trace(",
        "xplane_pb2.XSpace()",
    ],
    "13_hosts_on_one_machine": ["tf.train.ClusterSpec(", "tf.distribute.Server(", "tf.device("],
    "13b_cut_cable": [
        "TF_GRPC_DEFAULT_OPTIONS",
        "grpc.keepalive_time_ms",
        "RunOptions(timeout_in_ms=",
    ],
    "13c_open_door_and_deployment": ["tf.io.read_file(", "tf.compat.v1.Session(", "device_filters"],
    # Keras 3 on JAX: its lesson is keras.distribution and where JAX puts the pieces.
    "15_keras3_on_jax": [
        'os.environ["KERAS_BACKEND"] = "jax"',
        "xla_force_host_platform_device_count",
        "keras.distribution.DataParallel(",
        "keras.distribution.DeviceMesh(",
        "keras.distribution.LayoutMap(",
        "keras.distribution.ModelParallel(",
        ".addressable_shards",
    ],
}


def code_of(name: str) -> str:
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("name", sorted(LESSON_APIS))
def test_the_lessons_tensorflow_is_in_its_code_cells(name):
    code = code_of(name)
    missing = [api for api in LESSON_APIS[name] if api not in code]
    assert not missing, f"{name}: not in any code cell: {missing}"
