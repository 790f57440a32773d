"""The model itself: closed-form terms, the priced shard plan, what a cost function is given
(`inputs`), one cost function per architecture and the predicted step (`archbench predict`)."""
