"""`evalctl bisect`: from a regressed nightly to the engine build that did it.

builds.py (the ordered builds: git commits as worktrees, or a list), search.py (the culprit
posterior and which build to test next), steps.py (one step = one ordinary sequential run),
state.py (bisect.json, for resuming), session.py (the loop that ties them together).
"""
