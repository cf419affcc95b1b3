# tests/real: owned by its issue; see README
