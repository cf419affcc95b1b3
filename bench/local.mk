# bench: benchmarks (not tests). Fragments per concern.
include bench/fabric.mk
