"""Storage and the on-disk layout: where files live, which files form a checkpoint, atomic writes."""
