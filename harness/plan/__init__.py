"""Plan: which cases a scenario's matrix has -- every point a clean run passed, the recovery
window where second crashes go, the selection by scenario and command line -- and how to
run one of them again. Pure."""
