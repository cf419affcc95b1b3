# tools: owned by its issue; see README
