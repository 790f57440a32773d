"""The model itself: closed-form terms, the priced shard plan, one cost function per architecture
and the predicted step (`archbench predict`)."""
