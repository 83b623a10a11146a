"""The symmetric workspace: its single layout module (layout.py) and its allocation (symmetric.py)."""
