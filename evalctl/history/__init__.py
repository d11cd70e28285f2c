"""Run history: queries across the run folders of a results root."""
