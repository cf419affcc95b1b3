# provider benchmarks (fabric_*.sh)
