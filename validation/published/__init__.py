"""Published-benchmark validation: measured figures from public sources, predicted by simdist uncalibrated.

`cases.yaml` holds the figures with their sources and quotes; `cases.py` parses it; `runner.py` predicts
every case and builds the validate object that `simdist validate --published` prints.
"""
