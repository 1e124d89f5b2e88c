"""Plain result records (RunResult, StepRecord), metrics, and writers (JSON, CSV, Chrome trace)."""
