"""Workbench widgets: one widget (or a tight family) per module."""
