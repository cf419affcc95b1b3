/* The stream header's parser (stk_stream_proto.h). */
#include "config.h"
#include "stack/stk_stream_proto.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

int stk_msg_parse(const void *msg, size_t len, struct stk_msg_in *in)
{
	struct stk_msg_hdr hdr;
	if (len < sizeof(hdr))
		return -EBADMSG;
	memcpy(&hdr, msg, sizeof(hdr));
	in->slot = le32toh(hdr.slot);
	if (in->slot >= STK_CONN_MAX)
		return -EBADMSG;
	in->conn_id = le64toh(hdr.conn_id);
	in->seq = le32toh(hdr.seq);
	in->len = le32toh(hdr.len);
	in->flags = le16toh(hdr.flags);
	in->bells = le16toh(hdr.bells);
	in->payload = len - sizeof(hdr);
	in->data_ok = !(in->flags & STK_MSG_DATA) || in->len == in->payload;
	return 0;
}
