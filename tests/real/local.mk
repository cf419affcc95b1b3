# tests/real: real programs under the launcher (pass-through mode).
