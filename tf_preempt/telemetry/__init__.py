"""Consumers of the scheduler's telemetry (trace export). No TensorFlow."""
