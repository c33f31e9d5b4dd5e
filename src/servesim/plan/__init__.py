"""Planning layer: predictions and searches composed from the hardware and simulation layers."""
