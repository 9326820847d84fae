"""Plots (matplotlib, headless): each module draws from Results or summaries only."""
