"""The operations: one module per thing ckptool does to checkpoints."""
