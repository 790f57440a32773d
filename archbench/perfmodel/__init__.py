"""Analytical performance model of PS / P2P / ring training, its calibration and its uses."""
