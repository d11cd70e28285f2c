"""`evalctl bisect`: from a regressed nightly to the engine build that did it."""
