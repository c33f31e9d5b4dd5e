"""What users bring, read safely (imports only :mod:`servesim.model`): request traces
(:mod:`~servesim.inputs.traces`, :mod:`~servesim.inputs.fetch`), serving-engine telemetry
(:mod:`~servesim.inputs.telemetry`), measured points to calibrate on
(:mod:`~servesim.inputs.calibrate`) and benchmark files to predict or compare
(:mod:`~servesim.inputs.bench`).  Every file is decoded and bounded, and a problem is one line
naming the file, the line and the field."""
