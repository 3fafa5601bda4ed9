#!/usr/bin/env python3
"""Retrains digits_gru: the shared ../train_digits.py with this model's settings.
The split is digits_lstm's, so its test_set.json is shared (symlinked here)."""
import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
shared = os.path.join(here, "..", "digits_lstm", "test_set.json")
sys.argv = ["train_digits.py", "--cell", "gru", "--hidden", "32", "--out", here,
            "--test-set", shared] + sys.argv[1:]
runpy.run_path(os.path.join(here, "..", "train_digits.py"), run_name="__main__")
