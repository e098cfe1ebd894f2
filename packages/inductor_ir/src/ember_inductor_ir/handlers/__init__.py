"""Handlers for the virtual ``ops`` namespace: printer, dtype propagation, read/write sets,
and the torch interpreter. Each is passed explicitly to a loop body."""
