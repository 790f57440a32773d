"""Searching a design space with the model, and what-if curves (`archbench optimize`)."""
