"""Measuring the machine: microbenchmarks launched like any run, and the calibration they give."""
