"""Workbench screens and modal forms."""
