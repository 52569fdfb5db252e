"""ops/nonzero"""
