#include "config.h"
#include "stack/stk_wake.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct stk_wake {
	int rd, wr;          /* our socket pair's ends, -1 none */
	ino_t rd_ino, wr_ino;
	unsigned fork_gen;   /* made in this process (see fork_gen) */
};

static __thread struct stk_wake tls_wake = { .rd = -1, .wr = -1 };
static pthread_key_t wake_key;
static pthread_once_t wake_once = PTHREAD_ONCE_INIT;
static unsigned fork_gen; /* bumped in a forked child: inherited channels are the parent's */

static void close_if_ours(int *fd, ino_t ino)
{
	if (stk_sys_fd_is(*fd, ino))
		stk_sys.close(*fd);
	*fd = -1;
}

static void thread_exit(void *arg)
{
	struct stk_wake *w = arg;
	close_if_ours(&w->rd, w->rd_ino);
	close_if_ours(&w->wr, w->wr_ino);
}

void stk_wake_atfork_child(void)
{
	fork_gen++;
}

static void init_once(void)
{
	pthread_key_create(&wake_key, thread_exit);
}

/* One end moved up to the stack's fd range; its inode recorded. */
static int settle(int fd, ino_t *ino)
{
	int high = stk_sys_dup_high(fd);
	stk_sys.close(fd);
	struct stat st;
	if (high >= 0 && fstat(high, &st) != 0) {
		stk_sys.close(high);
		return -1;
	}
	if (high >= 0)
		*ino = st.st_ino;
	return high;
}

static bool make(struct stk_wake *w)
{
	int sv[2];
	/* the raw call: the preload's socketpair would track it as the app's */
	if (syscall(SYS_socketpair, AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		return false;
	w->rd = settle(sv[0], &w->rd_ino);
	w->wr = settle(sv[1], &w->wr_ino);
	if (w->rd < 0 || w->wr < 0) {
		close_if_ours(&w->rd, w->rd_ino);
		close_if_ours(&w->wr, w->wr_ino);
		return false;
	}
	w->fork_gen = __atomic_load_n(&fork_gen, __ATOMIC_RELAXED);
	pthread_setspecific(wake_key, w);
	return true;
}

bool stk_wake_prepare(struct stk_wake_node *node)
{
	struct stk_wake *w = &tls_wake;
	pthread_once(&wake_once, init_once);
	node->next = NULL;
	node->wake = w;
	node->rung = false;
	if (w->rd >= 0 && w->fork_gen != __atomic_load_n(&fork_gen, __ATOMIC_RELAXED)) {
		/* the parent's, inherited: ours to close here, the parent keeps its own */
		close_if_ours(&w->rd, w->rd_ino);
		close_if_ours(&w->wr, w->wr_ino);
	}
	if (w->rd >= 0 && stk_sys_fd_is(w->rd, w->rd_ino) && stk_sys_fd_is(w->wr, w->wr_ino))
		return true;
	/* closed behind our back (or never made): the numbers may be the app's now */
	w->rd = w->wr = -1;
	return make(w);
}

int stk_wake_fd(const struct stk_wake_node *node)
{
	return node->wake->rd;
}

void stk_wake_ring(struct stk_wake_node *node)
{
	if (node->rung)
		return;
	node->rung = true;
	struct stk_wake *w = node->wake;
	if (!stk_sys_fd_is(w->wr, w->wr_ino))
		return; /* the app closed it while the thread slept: its cap wakes it */
	char b = 1;
	/* EAGAIN: datagrams are queued already, the thread wakes anyway */
	ssize_t ret = stk_sys.send(w->wr, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)ret;
}

void stk_wake_drain(struct stk_wake_node *node)
{
	char buf[16];
	for (int i = 0; i < 64; i++)
		if (stk_sys.recv(node->wake->rd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
			break;
}
