"""ops/argreduce"""
