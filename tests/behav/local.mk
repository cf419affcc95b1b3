# tests/behav: owned by its issue; see README
