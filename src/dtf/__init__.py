"""Helpers shared by the notebooks of "Distributed TensorFlow, hands-on".

Each module is small. A notebook first shows the idea in plain TensorFlow (or plain Python),
and only then imports the helper that does it:

- ``dtf.quiet``     silence TensorFlow's C++ log lines (call before importing TensorFlow)
- ``dtf.devices``   make any machine look like N devices, and list what is there
- ``dtf.masking``   model ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` without a GPU
- ``dtf.placement`` capture device-placement logs as a table
- ``dtf.towers``    in-graph replication: one model copy per device, gradients averaged
- ``dtf.parallel``  model, data and pipeline parallelism of one small network, and their costs
- ``dtf.arguments`` argument checks shared by ``dtf.parallel`` and the pipeline lesson
- ``dtf.data``      offline-first data sets (bundled digits; Keras' MNIST, CIFAR-10, ...)
- ``dtf.metrics``   record a notebook's result for the headless run report
- ``dtf.cluster``   real TensorFlow clusters of server processes on this machine; its server
                    is the command ``dtf-server`` (``python -m dtf.cluster.server``)
- ``dtf.supervise`` how every child process is started, tied to its parent, stopped and reaped
- ``dtf.netns``     hosts as Linux network namespaces (root): own addresses, cut links, and a
                    cluster only this machine reaches (``private_cluster``)
- ``dtf.multiworker`` MultiWorkerMirroredStrategy workers as processes, with failures
- ``dtf.scaling``   run a measurement program in a process of its own, read its JSON line
- ``dtf.profiling`` load tf.profiler's trace (XSpace) and plot steps
- ``dtf.timing``    timing verdicts from repeats and their spread; the machine's load
- ``dtf.params``    refuse a bad notebook parameter, naming it and its range
- ``dtf.checks``    lab checkers, one module per lab
- ``dtf.lessons``   GENERATED from the notebooks' cells marked ``# export: dtf/lessons/NAME.py``
                    (``python -m tools.export``): the lessons' own TensorFlow, for the code
                    above, the tests and worker processes. Nothing else lives there.

Importing ``dtf`` does not import TensorFlow, so ``dtf.quiet`` can still act. The modules form
layers (``[tool.importlinter]`` in pyproject.toml): checks above lessons above the plumbing
above the small helpers; none imports a layer above its own.
"""

__version__ = "0.1.0"
