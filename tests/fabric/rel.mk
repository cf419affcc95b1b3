# tests of the reliability/RDM engine
