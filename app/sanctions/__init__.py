"""Spam sanctions with hysteresis (seed 002 §16.2): score feed, quarantine, ban, appeal."""
