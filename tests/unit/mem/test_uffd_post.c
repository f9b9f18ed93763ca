/* SPDX-License-Identifier: MIT */
/*
 * Invariant: under gw_uffd_post, a thread touching a page of guest RAM that
 * is not placed waits (without spinning) until it is, then sees the placed
 * content whole; placing a page twice is refused (-EEXIST); a page whose
 * cached copy is right is mapped by resolve; zero pages read as zeros; the
 * fault names the thread. For memfd RAM (minor + missing faults: a page
 * written by precopy into the page cache, a stale one, a hole) and for
 * anonymous RAM (missing faults). Skips where userfaultfd cannot do it.
 */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "mem/uffd_post.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGE 4096u
#define NR_PAGES 64u

struct toucher {
	uint8_t *p;			/* page to touch */
	bool write;
	pid_t tid;			/* set by the thread */
	uint8_t seen;			/* first byte read after the fault */
	pthread_t th;
};

static void *touch_main(void *arg)
{
	struct toucher *t = arg;

	__atomic_store_n(&t->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	if (t->write) {
		uint8_t old = t->p[0];	/* the fault: a read first, then the write */

		t->p[1] = (uint8_t)(old + 1);
	}
	t->seen = t->p[0];
	return NULL;
}

/* The next fault, waiting at most 5 s. */
static struct gw_uffd_fault next_fault(struct gw_uffd_post *u)
{
	struct pollfd pfd = { gw_uffd_post_fd(u), POLLIN, 0 };
	struct gw_uffd_fault f;

	for (int i = 0; i < 50; i++) {
		if (gw_uffd_post_read(u, &f, 1) == 1)
			return f;
		poll(&pfd, 1, 100);
	}
	TEST_ASSERT(0, "no fault arrived within 5 s");
	return f;
}

static void start(struct toucher *t, uint8_t *host, unsigned page, bool write)
{
	*t = (struct toucher){ .p = host + (size_t)page * PAGE, .write = write };
	TEST_ASSERT(pthread_create(&t->th, NULL, touch_main, t) == 0, "thread");
}

static void check_ram(bool memfd)
{
	struct gw_ram_block blk = { 0 };
	struct gw_vm_info vm = { .size = sizeof(vm), .nr_blocks = 1, .blocks = &blk, .kvm_vm_fd = -1 };
	struct gw_ram_block *b = &vm.blocks[0];
	uint8_t page[PAGE], stale[PAGE];
	struct gw_uffd_post *u;
	struct toucher t[3];
	bool user_only;
	int fd = -1, ret;

	snprintf(b->name, sizeof(b->name), "ram0");
	b->size_bytes = NR_PAGES * PAGE;
	b->page_size_bytes = PAGE;
	if (memfd) {
		fd = memfd_create("uffd-post", MFD_CLOEXEC);
		TEST_ASSERT(fd >= 0 && ftruncate(fd, b->size_bytes) == 0, "memfd");
		b->host = mmap(NULL, b->size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		/* Precopy: page 1 right, page 2 stale, in the page cache; page 3 a hole. */
		memset(page, 0x11, PAGE);
		memset(stale, 0x22, PAGE);
		TEST_ASSERT(pwrite(fd, page, PAGE, 1 * PAGE) == PAGE && pwrite(fd, stale, PAGE, 2 * PAGE) == PAGE,
			    "pwrite");
		memset(b->host, 0x33, PAGE);	/* page 0 mapped (a VMM's prealloc): unmapped by open */
	} else {
		b->host = mmap(NULL, b->size_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memset((uint8_t *)b->host + 1 * PAGE, 0x11, PAGE);
		memset((uint8_t *)b->host + 2 * PAGE, 0x22, PAGE);
	}
	TEST_ASSERT(b->host != MAP_FAILED, "mmap");
	b->fd = fd;
	ret = gw_uffd_post_open(&vm, &u, &user_only);
	if (ret == -EOPNOTSUPP)
		test_skip("userfaultfd postcopy modes unavailable here");
	TEST_ASSERT(ret == 0, "open: %s", strerror(-ret));
	if (!memfd)
		TEST_ASSERT(gw_uffd_post_zap(u, 0, 2, 1) == 0, "zap the stale page");

	/* A page that is right already: memfd, a minor fault resolved without new
	 * content; anonymous, still mapped: no fault at all. */
	start(&t[0], b->host, 1, true);
	if (memfd) {
		struct gw_uffd_fault f = next_fault(u);

		TEST_CHECK(f.block == 0 && f.page == 1, "fault on page 1, got %llu", (unsigned long long)f.page);
		TEST_CHECK(f.minor, "memfd page in the page cache: a minor fault");
		TEST_CHECK(f.tid == __atomic_load_n(&t[0].tid, __ATOMIC_ACQUIRE), "the fault names the thread");
		TEST_CHECK(gw_uffd_post_resolve(u, 0, 1, f.minor) == 0, "resolve page 1");
	}
	pthread_join(t[0].th, NULL);
	TEST_CHECK(t[0].seen == 0x11, "page 1 reads its precopy content, got 0x%x", t[0].seen);
	/* A hole the source never had: resolved as a zero page. */
	start(&t[0], b->host, 5, true);
	{
		struct gw_uffd_fault f = next_fault(u);

		TEST_CHECK(f.page == 5 && !f.minor, "missing fault on page 5");
		TEST_CHECK(f.tid == __atomic_load_n(&t[0].tid, __ATOMIC_ACQUIRE), "the fault names the thread");
		TEST_CHECK(gw_uffd_post_resolve(u, 0, 5, f.minor) == 0, "resolve page 5");
		TEST_CHECK(gw_uffd_post_resolve(u, 0, 5, f.minor) == 0, "resolving again only wakes");
	}
	pthread_join(t[0].th, NULL);
	TEST_CHECK(t[0].seen == 0, "page 5 reads zero");

	/* A stale page and a hole: both wait for content, then see it whole. */
	start(&t[1], b->host, 2, true);
	start(&t[2], b->host, 3, false);
	for (int k = 0; k < 2; k++) {
		struct gw_uffd_fault f = next_fault(u);

		if (f.page == 2) {
			memset(page, 0x44, PAGE);
			TEST_CHECK(gw_uffd_post_place(u, 0, 2, 1, page) == 0, "place page 2");
			/* Anonymous RAM: the kernel refuses a second copy. (fd-backed RAM
			 * writes the page cache first: the caller's claim keeps a page
			 * from being placed twice, see uffd_post.h.) */
			if (!memfd)
				TEST_CHECK(gw_uffd_post_place(u, 0, 2, 1, page) == -EEXIST, "placed twice: refused");
		} else {
			TEST_CHECK(f.page == 3, "fault on page 3, got %llu", (unsigned long long)f.page);
			TEST_CHECK(gw_uffd_post_zero(u, 0, 3, 1) == 0, "zero page 3");
		}
	}
	pthread_join(t[1].th, NULL);
	pthread_join(t[2].th, NULL);
	TEST_CHECK(t[1].seen == 0x44, "page 2 reads the placed content, got 0x%x", t[1].seen);
	TEST_CHECK(t[2].seen == 0, "page 3 reads zero, got 0x%x", t[2].seen);
	TEST_CHECK(((uint8_t *)b->host)[2 * PAGE + 1] == 0x45, "%s: the write after the fault landed, got 0x%x", memfd ? "memfd" : "anon", ((uint8_t *)b->host)[2 * PAGE + 1]);

	/* A run placed ahead of any fault, then read without faulting. */
	memset(page, 0x55, PAGE);
	for (unsigned p = 10; p < 14; p++)
		TEST_CHECK(gw_uffd_post_place(u, 0, p, 1, page) == 0, "place page %u", p);
	TEST_CHECK(((uint8_t *)b->host)[12 * PAGE + 100] == 0x55, "placed page readable");
	TEST_CHECK(gw_uffd_post_read(u, (struct gw_uffd_fault[1]){ 0 }, 1) == 0, "no fault pending");
	gw_uffd_post_close(u);
	/* Unregistered: a page never placed reads what the memory holds, no fault. */
	TEST_CHECK(((uint8_t *)b->host)[7 * PAGE] == 0, "after close a hole reads zero, no fault");
	if (memfd)
		TEST_CHECK(((uint8_t *)b->host)[0] == 0x33, "page 0 kept its content through the unmapping");
	munmap(b->host, b->size_bytes);
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	char why[256];

	if (gw_uffd_post_probe(why, sizeof(why)))
		test_skip("%s", why);
	check_ram(true);
	check_ram(false);
	TEST_EXIT();
}
