"""Peer-to-peer exchange on numpy buffers: the shard plan and the point-to-point messages."""
