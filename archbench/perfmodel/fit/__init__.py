"""Fitting the model's free parameters on a study's records and scoring it (`archbench model`)."""
