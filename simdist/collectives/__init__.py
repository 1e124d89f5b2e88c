"""Collective algorithms as step schedules (schedule.py) and their alpha-beta closed forms (cost.py)."""
