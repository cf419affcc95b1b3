/* libFuzzer target: fdp_frame_parse must never read outside the buffer,
 * whatever the bytes, and must return a known drop reason. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/fdp_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fdp_frame_view v;
	unsigned int flags;
	uint8_t *copy;
	int r;

	if (size < 1)
		return 0;
	/* first byte: parse flags (which checksums the "device" verified) */
	flags = data[0] & (FDP_PARSE_IP_CSUM_OK | FDP_PARSE_UDP_CSUM_OK);
	if ((data[0] & 0x4) && size - 1 <= 9000) {
		/* Wrap the bytes in valid Ethernet/IPv4/UDP headers with right
		 * checksums, so the fuzzer reaches the provider header parser
		 * instead of dying at the checksum. */
		struct fdp_frame_addrs a;

		memset(&a, 0x02, sizeof(a));
		copy = malloc(FDP_L2L4_HLEN + size - 1);
		if (!copy)
			return 0;
		fdp_frame_build_hdrs(copy, &a, size - 1, 1);
		memcpy(copy + FDP_L2L4_HLEN, data + 1, size - 1);
		fdp_frame_csum(copy, true, true);
		size += FDP_L2L4_HLEN;
	} else {
		/* an exact-size heap copy, so ASan sees any overread */
		copy = malloc(size - 1 ? size - 1 : 1);
		if (!copy)
			return 0;
		memcpy(copy, data + 1, size - 1);
	}
	r = fdp_frame_parse(copy, size - 1, flags, &v);
	if (r < 0 || r >= FDP_DROP__COUNT)
		abort();
	if (r == FDP_DROP_NONE && v.kind == FDP_FRAME_FDP) {
		/* every pointer handed on lies inside the frame */
		if (v.fdp < copy || v.fdp + v.fdp_len > copy + size - 1)
			abort();
		if (v.type == FDP_TYPE_DGRAM &&
		    (v.payload < v.fdp || v.payload + v.payload_len > v.fdp + v.fdp_len))
			abort();
	}
	/* the first step alone (raw UDP endpoints): its payload in the frame */
	r = fdp_frame_parse_udp(copy, size - 1, flags, &v);
	if (r < 0 || r >= FDP_DROP__COUNT)
		abort();
	if (r == FDP_DROP_NONE && v.kind == FDP_FRAME_UDP &&
	    (v.udp_payload < copy || v.udp_payload + v.udp_payload_len > copy + size - 1))
		abort();
	free(copy);
	return 0;
}
