/* libFuzzer target: the negotiation records a peer sends (stk_nego_decode, for
 * every record type and status) and the checks of what they say (stk_peer),
 * whatever the bytes: no read outside the buffer (an exact-size heap copy, so
 * ASan sees an overread), a known return code, a whole message that re-encodes
 * to a record decoding to the same message, and a verdict of stk_peer_check
 * for each provider it names, under each address format. */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>

#include "stack/stk_nego.h"
#include "stack/stk_peer.h"
#include "stack/stk_sys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* stk_peer's only links outside the codec: the host identity (a fixed one) and
 * the system call table (never reached: the kernel peer below is not
 * loopback, so no local-address probe). */
struct stk_sys stk_sys;

bool stk_nego_same_host(const struct stk_nego_msg *peer)
{
	return peer->boot_id[0] == 0x5a && peer->netns == 4026531840u;
}

static const uint32_t formats[] = { FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_SOCKADDR, FI_ADDR_STR,
				    FI_FORMAT_UNSPEC };

static void check_provs(const struct stk_nego_msg *msg)
{
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000001) };
	for (unsigned i = 0; i < msg->nprov; i++)
		for (unsigned f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
			const char *why = NULL;
			int r = stk_peer_check(msg, &msg->prov[i], formats[f],
					       (struct sockaddr *)&peer, &why);
			assert(r == 0 || (r == -EINVAL && why));
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	struct stk_nego_msg msg;
	size_t msg_len = 0;
	int r = stk_nego_decode(copy, size, &msg, &msg_len);
	assert(r == 0 || r == -EAGAIN || r == -EPROTO || r == -EPROTONOSUPPORT || r == -EBADMSG);
	if (r == 0) {
		assert(msg_len >= STK_NEGO_HDR_LEN && msg_len <= size && msg_len <= STK_NEGO_MSG_MAX);
		uint8_t buf[STK_NEGO_MSG_MAX];
		ssize_t n = stk_nego_encode(&msg, buf, sizeof(buf));
		assert(n >= STK_NEGO_HDR_LEN && n <= (ssize_t)msg_len);
		struct stk_nego_msg again;
		size_t again_len = 0;
		assert(stk_nego_decode(buf, (size_t)n, &again, &again_len) == 0);
		assert(again_len == (size_t)n && again.type == msg.type &&
		       again.status == msg.status && again.conn_id == msg.conn_id &&
		       again.slot == msg.slot && again.credits == msg.credits &&
		       again.nprov == msg.nprov);
		for (unsigned i = 0; i < msg.nprov; i++)
			assert(strcmp(again.prov[i].name, msg.prov[i].name) == 0 &&
			       again.prov[i].addr_len == msg.prov[i].addr_len &&
			       memcmp(again.prov[i].addr, msg.prov[i].addr, msg.prov[i].addr_len) == 0);
		check_provs(&msg);
	}
	/* the address rules straight on the bytes, as each provider */
	static const char *const names[] = { "shm", "tcp", "dpdk" };
	if (size >= 1) {
		const char *why = NULL;
		int a = stk_peer_addr_check(names[data[0] % 3], formats[(data[0] >> 2) % 5], copy + 1,
					    size - 1, NULL, &why);
		assert(a == 0 || (a == -EINVAL && why));
	}
	free(copy);
	return 0;
}
