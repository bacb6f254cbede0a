"""Default policy files, shipped with the package so a fresh install has rules."""
