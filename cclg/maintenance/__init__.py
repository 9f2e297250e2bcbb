"""Maintenance: keeping a store healthy, and the demo store.

- ``doctor``: ``cclg doctor``: diagnose (records, logs, projections, config) and repair;
- ``demo``: building the bundled demo store.
"""
