"""Helpers shared by the notebooks of "Distributed TensorFlow, hands-on".

Each module is small and is shown in plain TensorFlow in a notebook before the
notebook imports it:

- ``dtf.quiet``     silence TensorFlow's C++ log lines (call before importing TensorFlow)
- ``dtf.devices``   make any machine look like N devices, and list what is there
- ``dtf.placement`` capture device-placement logs as a table
- ``dtf.data``      offline-first data sets (scikit-learn digits; Keras' MNIST, CIFAR-10, ...)
- ``dtf.metrics``   record a notebook's result for the headless run report

Importing ``dtf`` does not import TensorFlow, so ``dtf.quiet`` can still act.
"""

__version__ = "0.1.0"
