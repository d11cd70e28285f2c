"""evalctl: catch accuracy regressions in served language models."""

__version__ = "0.1.0"
