"""The run: one stage as a user runs it (`stages`: locked, skipped when its record still matches,
recorded), the step records (`records`), `tpurank all` (`pipeline`), and its time budget: the plan
made before training (`plan`) and the budget held against it while the run goes (`budget`)."""
