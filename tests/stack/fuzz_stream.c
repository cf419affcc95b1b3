/* libFuzzer target: the stream header of every fabric message a peer sends
 * (stk_msg_parse, the part of stk_stream_deliver that reads the bytes), on an
 * exact-size heap copy: no read outside it, a stray verdict exactly for the
 * short or out-of-range ones, and fields that say what the bytes say. */
#include "config.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stack/stk_stream.h"
#include "stack/stk_stream_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	struct stk_msg_in in;
	int r = stk_msg_parse(copy, size, &in);
	if (size < sizeof(struct stk_msg_hdr)) {
		assert(r == -EBADMSG);
	} else {
		uint32_t slot;
		memcpy(&slot, copy + 8, 4);
		assert((r == 0) == (le32toh(slot) < STK_CONN_MAX));
		if (r == 0) {
			assert(in.payload == size - sizeof(struct stk_msg_hdr));
			assert(in.data_ok == (!(in.flags & STK_MSG_DATA) || in.len == in.payload));
		}
	}
	free(copy);
	return 0;
}
