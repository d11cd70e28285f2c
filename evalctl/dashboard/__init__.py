"""The release sign-off dashboard: a static site over a results root."""
