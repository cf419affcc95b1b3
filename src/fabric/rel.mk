# src/fabric reliability/RDM engine fragment (fdp_rel*, fdp_msg*, fdp_rdm*)
