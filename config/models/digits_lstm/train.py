#!/usr/bin/env python3
"""Retrains digits_lstm: the shared ../train_digits.py with this model's settings."""
import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.argv = ["train_digits.py", "--cell", "lstm", "--hidden", "64", "--out", here] + sys.argv[1:]
runpy.run_path(os.path.join(here, "..", "train_digits.py"), run_name="__main__")
