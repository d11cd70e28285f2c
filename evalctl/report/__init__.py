"""Presentation: terminal tables, plots and files written from analysis tables."""
