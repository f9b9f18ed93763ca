/* SPDX-License-Identifier: MIT */
/*
 * Helpers for engine unit tests: memfd-backed guest RAM fenced by read-only
 * guard regions, and a trivial VM whose ops count their calls and can stop
 * and restart a "guest" (a writer thread) on pause/resume.
 *
 * Threads: struct test_ram is owned by the test's main thread; the counters
 * of struct test_vm are atomics written by the engine's threads and read by
 * the test; the hooks are set before the session starts.
 */
#ifndef GW_TEST_VM_H
#define GW_TEST_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <godwit/godwit.h>

#define TEST_PAGE_BYTES 4096u
#define TEST_GUARD_BYTE 0xa5

struct test_ram {
	uint8_t *map;			/* whole reservation: guard | RAM | guard */
	uint8_t *host;			/* guest RAM, size_bytes long */
	size_t size_bytes;
	size_t guard_bytes;		/* each side; 0 = no guards */
	int fd;				/* memfd backing host */
	struct gw_ram_block block;	/* test_vm_info_one's block (gw_vm_info points at it) */
};

/* memfd RAM of @size_bytes with @guard_bytes read-only guards each side. 0 or -errno. */
int test_ram_create(struct test_ram *r, const char *name, size_t size_bytes, size_t guard_bytes);
/* True when both guards still hold TEST_GUARD_BYTE everywhere. */
bool test_ram_guards_intact(const struct test_ram *r);
void test_ram_destroy(struct test_ram *r);
/* A one-block layout: block @name over @r at gpa 0 (the block lives in @r). */
void test_vm_info_one(struct gw_vm_info *vm, struct test_ram *r, const char *name);

struct test_vm {
	unsigned pause_calls, resume_calls;	/* atomics */
	unsigned save_calls, load_calls;	/* atomics */
	/* Optional hooks (set before the session starts). */
	void (*on_pause)(void *arg);
	void (*on_resume)(void *arg);
	/* Free-page hints (gw_vm_ops.hints_start/stop); NULL: the VM has none. */
	void (*on_hints_start)(void *arg, struct gw_session *s);
	void (*on_hints_stop)(void *arg);
	/* Postcopy (gw_vm_ops.vcpu_of_thread / postcopy_ram); NULL: absent. */
	int (*on_vcpu_of_thread)(void *arg, pid_t tid);
	int (*on_postcopy_ram)(void *arg, bool complete);
	unsigned postcopy_ram_calls[2];	/* atomics: calls with complete false, true */
	void *hook_arg;
	/* save_state adds this section when sec_name[0]; load_state requires it. */
	char sec_name[GW_SECTION_NAME_MAX];
	uint8_t sec_data[64];
	bool load_checks_section;
	bool load_saw_section;		/* the section arrived intact */
};

/*
 * A guest thread's park handshake (atomics): the VM's pause hook parks the
 * guest between two of its operations, resume lets it go on.
 */
struct test_park {
	int want_pause, parked, quit;
};
/* Guest thread, between two operations: parks while a pause is asked. False once it must quit. */
bool test_park_point(struct test_park *p);
/* Returns once the guest is parked. */
void test_park_pause(struct test_park *p);
void test_park_resume(struct test_park *p);
/* The guest thread ends at its next park point. */
void test_park_quit(struct test_park *p);

/* Ops over a struct test_vm passed as opaque. */
extern const struct gw_vm_ops test_vm_ops;

static inline unsigned test_vm_load(const unsigned *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Quiet the engine's log unless GW_TEST_VERBOSE is set (the last lines are kept). */
void test_log_quiet(void);
/*
 * Fail after @seconds (times GW_TEST_TIME_SCALE when set, for sanitizer
 * builds) with the last log lines printed: a hang fails fast, well under
 * meson's timeout. A bound, never a pass criterion.
 */
void test_time_bound(unsigned seconds);

#endif
