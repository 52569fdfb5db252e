"""ops/segment: argmin / argmax over ragged segments along axis 0"""
