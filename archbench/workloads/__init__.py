"""What a run trains on: the built-in models (`models`) and data sets (`data`, `words`), and
the workloads a user brings: a model of their own (a function in a Python file or module, or a
saved Keras model with its weights) and data of their own (NumPy arrays, CSV tables, time series)."""
