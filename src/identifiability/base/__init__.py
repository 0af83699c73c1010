"""Leaf utilities every band stands on: paths, files, errors, numbers and intervals, the Dask cluster, stops.

Nothing here imports another package of identifiability."""
