"""Workloads a user brings: a model of their own (a function in a Python file or module, or a
saved Keras model with its weights) and data of their own (NumPy arrays, CSV tables, time series),
beside the built-in models (`archbench.models`) and data sets (`archbench.data`)."""
