"""Fault-injecting proxy: a test aid that proves a sweep or probe catches a class of serving bug."""
