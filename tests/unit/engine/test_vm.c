/* SPDX-License-Identifier: MIT */
/* Helpers for engine unit tests (see test_vm.h). */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "test_vm.h"

int test_ram_create(struct test_ram *r, const char *name, size_t size_bytes, size_t guard_bytes)
{
	size_t total = size_bytes + 2 * guard_bytes;
	void *p;
	int ret;

	memset(r, 0, sizeof(*r));
	r->fd = memfd_create(name, MFD_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	if (ftruncate(r->fd, (off_t)size_bytes)) {
		ret = -errno;
		goto err_fd;
	}
	/* Reserve the whole range, then put RAM and guards in it. */
	r->map = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r->map == MAP_FAILED) {
		ret = -errno;
		goto err_fd;
	}
	r->size_bytes = size_bytes;
	r->guard_bytes = guard_bytes;
	r->host = r->map + guard_bytes;
	p = mmap(r->host, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, r->fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto err_map;
	}
	if (guard_bytes) {
		uint8_t *guards[2] = { r->map, r->host + size_bytes };

		for (int i = 0; i < 2; i++) {
			p = mmap(guards[i], guard_bytes, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (p == MAP_FAILED) {
				ret = -errno;
				goto err_map;
			}
			memset(guards[i], TEST_GUARD_BYTE, guard_bytes);
			if (mprotect(guards[i], guard_bytes, PROT_READ)) {
				ret = -errno;
				goto err_map;
			}
		}
	}
	return 0;
err_map:
	munmap(r->map, total);
err_fd:
	close(r->fd);
	r->fd = -1;
	return ret;
}

bool test_ram_guards_intact(const struct test_ram *r)
{
	const uint8_t *guards[2] = { r->map, r->host + r->size_bytes };

	for (int g = 0; g < 2 && r->guard_bytes; g++)
		for (size_t i = 0; i < r->guard_bytes; i++)
			if (guards[g][i] != TEST_GUARD_BYTE)
				return false;
	return true;
}

void test_ram_destroy(struct test_ram *r)
{
	if (r->map)
		munmap(r->map, r->size_bytes + 2 * r->guard_bytes);
	if (r->fd >= 0)
		close(r->fd);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

void test_vm_info_one(struct gw_vm_info *vm, struct test_ram *r, const char *name)
{
	memset(vm, 0, sizeof(*vm));
	memset(&r->block, 0, sizeof(r->block));
	vm->size = sizeof(*vm);
	vm->blocks = &r->block;
	vm->kvm_dirty_ring_full_efd = -1;
	vm->nr_blocks = 1;
	vm->kvm_vm_fd = -1;
	vm->nr_vcpus = 1;
	snprintf(vm->blocks[0].name, sizeof(vm->blocks[0].name), "%s", name);
	vm->blocks[0].host = r->host;
	vm->blocks[0].size_bytes = r->size_bytes;
	vm->blocks[0].page_size_bytes = TEST_PAGE_BYTES;
	vm->blocks[0].fd = r->fd;
}

bool test_park_point(struct test_park *p)
{
	if (__atomic_load_n(&p->want_pause, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&p->parked, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&p->want_pause, __ATOMIC_ACQUIRE) &&
		       !__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE))
			usleep(50);
		__atomic_store_n(&p->parked, 0, __ATOMIC_RELEASE);
	}
	return !__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE);
}

void test_park_pause(struct test_park *p)
{
	__atomic_store_n(&p->want_pause, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&p->parked, __ATOMIC_ACQUIRE))
		sched_yield();
}

/* Returns once the guest left its park: a pause right after cannot see a stale "parked". */
void test_park_resume(struct test_park *p)
{
	__atomic_store_n(&p->want_pause, 0, __ATOMIC_RELEASE);
	while (__atomic_load_n(&p->parked, __ATOMIC_ACQUIRE) && !__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE))
		sched_yield();
}

void test_park_quit(struct test_park *p)
{
	__atomic_store_n(&p->quit, 1, __ATOMIC_RELEASE);
}

static int tvm_pause(void *opaque)
{
	struct test_vm *t = opaque;

	if (t->on_pause)
		t->on_pause(t->hook_arg);
	__atomic_fetch_add(&t->pause_calls, 1, __ATOMIC_ACQ_REL);
	return 0;
}

static int tvm_resume(void *opaque)
{
	struct test_vm *t = opaque;

	__atomic_fetch_add(&t->resume_calls, 1, __ATOMIC_ACQ_REL);
	if (t->on_resume)
		t->on_resume(t->hook_arg);
	return 0;
}

static int tvm_save(void *opaque, struct gw_state *st)
{
	struct test_vm *t = opaque;

	__atomic_fetch_add(&t->save_calls, 1, __ATOMIC_ACQ_REL);
	if (!t->sec_name[0])
		return 0;
	return gw_state_add(st, t->sec_name, 3, t->sec_data, sizeof(t->sec_data));
}

static int tvm_load(void *opaque, struct gw_state *st)
{
	struct test_vm *t = opaque;
	uint32_t version;
	size_t len;
	const void *data;

	__atomic_fetch_add(&t->load_calls, 1, __ATOMIC_ACQ_REL);
	if (!t->load_checks_section)
		return 0;
	data = gw_state_find(st, t->sec_name, &version, &len);
	if (!data || version != 3 || len != sizeof(t->sec_data) || memcmp(data, t->sec_data, len))
		return gw_state_reject(st, -EINVAL, "section %s missing or altered", t->sec_name);
	t->load_saw_section = true;
	return 0;
}

static void tvm_hints_start(void *opaque, struct gw_session *s)
{
	struct test_vm *t = opaque;

	if (t->on_hints_start)
		t->on_hints_start(t->hook_arg, s);
}

static void tvm_hints_stop(void *opaque)
{
	struct test_vm *t = opaque;

	if (t->on_hints_stop)
		t->on_hints_stop(t->hook_arg);
}

static int tvm_vcpu_of_thread(void *opaque, pid_t tid)
{
	struct test_vm *t = opaque;

	return t->on_vcpu_of_thread ? t->on_vcpu_of_thread(t->hook_arg, tid) : -1;
}

static int tvm_postcopy_ram(void *opaque, bool complete)
{
	struct test_vm *t = opaque;

	__atomic_fetch_add(&t->postcopy_ram_calls[complete], 1, __ATOMIC_ACQ_REL);
	return t->on_postcopy_ram ? t->on_postcopy_ram(t->hook_arg, complete) : 1;
}

const struct gw_vm_ops test_vm_ops = {
	.size = sizeof(struct gw_vm_ops),
	.pause = tvm_pause,
	.resume = tvm_resume,
	.save_state = tvm_save,
	.load_state = tvm_load,
	.hints_start = tvm_hints_start,
	.hints_stop = tvm_hints_stop,
	.vcpu_of_thread = tvm_vcpu_of_thread,
	.postcopy_ram = tvm_postcopy_ram,
};

/*
 * The last log lines, kept in a ring while the log is quiet, so that a test
 * that hangs prints what the engine was doing (test_time_bound).
 */
#define RING_LINES 40
#define RING_LINE_BYTES 240
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;	/* writers; the hang handler reads without it */
static char ring[RING_LINES][RING_LINE_BYTES];	/* ring_lock */
static unsigned ring_next;		/* ring_lock to advance; atomic reads */

static void quiet_sink(void *opaque, enum gw_log_level level, const char *line)
{
	unsigned slot;

	(void)opaque;
	/* Threads of the engine log at once: a slot is reused after RING_LINES lines. */
	pthread_mutex_lock(&ring_lock);
	slot = __atomic_fetch_add(&ring_next, 1, __ATOMIC_RELAXED) % RING_LINES;
	snprintf(ring[slot], sizeof(ring[slot]), "%s", line);
	pthread_mutex_unlock(&ring_lock);
	if (level <= GW_LOG_WARN && getenv("GW_TEST_SHOW_ERRORS"))
		fprintf(stderr, "%s\n", line);
}

void test_log_quiet(void)
{
	if (!getenv("GW_TEST_VERBOSE"))
		gw_log_set_sink(quiet_sink, NULL);
}

static void write_str(const char *str)
{
	size_t n = strlen(str);

	while (n) {
		ssize_t w = write(STDERR_FILENO, str, n);

		if (w <= 0)
			return;
		str += w;
		n -= (size_t)w;
	}
}

static void on_time_bound(int sig)
{
	unsigned end = __atomic_load_n(&ring_next, __ATOMIC_RELAXED);

	(void)sig;
	write_str("FAIL: time bound exceeded (a hang); last log lines:\n");
	for (unsigned i = end > RING_LINES ? end - RING_LINES : 0; i < end; i++) {
		write_str(ring[i % RING_LINES]);
		write_str("\n");
	}
	_exit(1);
}

void test_time_bound(unsigned seconds)
{
	const char *scale = getenv("GW_TEST_TIME_SCALE");	/* sanitizer builds run 5-20x slower */

	if (scale && atoi(scale) > 1)
		seconds *= (unsigned)atoi(scale);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	else
		seconds *= 5;	/* a sanitizer build run without the variable: still a bound, not a measure */
#endif
	signal(SIGALRM, on_time_bound);
	alarm(seconds);
}
