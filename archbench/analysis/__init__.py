"""Run records -> figures, tables and the written report (`archbench report`, `archbench compare`).

One module per report section, listed in `report.py`'s `SECTIONS`; README.md here explains each
figure and table.
"""
