import pytest

from dtf import devices
from tests.conftest import last_json, run_script


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 0}, "positive whole number"),
        ({"n": -2}, "positive whole number"),
        ({"n": 2.5}, "positive whole number"),
        ({"n": True}, "positive whole number"),
        ({"n": 2, "kind": "tpu"}, "kind must be one of"),
        ({"n": 2, "gpu_memory_mb": 10}, "gpu_memory_mb"),
    ],
)
def test_bad_requests_are_refused_before_tensorflow_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        devices.setup(**kwargs)


def test_four_logical_cpus_inventory_and_repeat():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices
        s = devices.setup(4)
        again = devices.setup(4)
        table = devices.inventory()
        counts = devices.counts(table)
        try:
            devices.setup(2)
            refused = ""
        except devices.DeviceConfigError as err:
            refused = str(err)
        # every logical device really computes
        outs = []
        for name in s.names:
            with tf.device(name):
                outs.append(tf.reduce_sum(tf.ones([3, 3])).device)
        print(json.dumps({
            "names": list(s.names), "type": s.device_type, "source": s.source,
            "same": again is s, "physical_cpu": int(counts.loc["CPU", "physical"]),
            "logical_cpu": int(counts.loc["CPU", "logical"]), "refused": refused,
            "levels": sorted(set(table.level)), "outs": outs,
            "current": devices.current() is s,
        }))
        """
    )
    r = last_json(proc)
    assert r["names"] == [f"/device:CPU:{i}" for i in range(4)]
    assert (r["type"], r["source"]) == ("CPU", "logical CPUs")
    assert r["same"] and r["current"]
    assert (r["physical_cpu"], r["logical_cpu"]) == (1, 4)
    assert r["levels"] == ["logical", "physical"]
    assert "Restart the kernel" in r["refused"] and "setup(2" in r["refused"]
    assert [o.split("device:")[-1] for o in r["outs"]] == [f"CPU:{i}" for i in range(4)]


def test_setup_after_tensorflow_initialised():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices
        tf.ones([1]) + 1  # an op before setup: TensorFlow initialises with 1 CPU
        try:
            devices.setup(3)
            msg = ""
        except devices.DeviceConfigError as err:
            msg = str(err)
        print(json.dumps({"msg": msg}))
        """
    )
    msg = last_json(proc)["msg"]
    assert "initialised before devices.setup(n=3)" in msg and "Restart the kernel" in msg


def test_one_device_after_initialisation_is_accepted_and_gpu_request_fails_clearly():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices
        try:
            devices.setup(2, kind="gpu")
            gpu_msg = ""
        except devices.DeviceConfigError as err:
            gpu_msg = str(err)
        tf.ones([1]) + 1
        s = devices.setup(1)  # the layout TensorFlow already has: fine
        print(json.dumps({"gpu_msg": gpu_msg, "names": list(s.names)}))
        """
    )
    r = last_json(proc)
    assert "sees no GPU" in r["gpu_msg"] and "kind='auto'" in r["gpu_msg"]
    assert r["names"] == ["/device:CPU:0"]
