"""Run records -> figures, tables and the written report: the package `archbench.analysis`.

A built wheel installs this folder as archbench/analysis/ (setup.cfg's `package_dir`); in a
checkout, and in an editable install, archbench/analysis/__init__.py points the package here.
"""
