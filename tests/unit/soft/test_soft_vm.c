/* SPDX-License-Identifier: MIT */
/*
 * Invariants of the soft VM:
 *  - fill content is a function of (fill, seed): same digest for two VMs,
 *    different for another seed; zero fill == no fill (populated zeros vs
 *    holes); mix has ~25% zero pages and every page populated.
 *  - progress advances while running and not while paused.
 *  - verify: with vCPUs paused every owned page holds exactly what (cursor,
 *    gen) says; one corrupted byte makes the check fail, naming the page.
 *  - migration by save_state -> incoming VM (setup_ram, copy of RAM or the
 *    source's fd, load_state) -> resume: the post-migration check passes,
 *    progress continues from the source's count, and the source refuses to
 *    run again once postmigrate.
 *  - a page lost on the way (a hole in the memfd) is named as never populated.
 *  - dirty: the first resume checks only when the RAM arrived shared (the
 *    source's fd: nothing else verifies it); a copy starts the vCPUs
 *    unchecked (the engine's digest verifies it) and check on request
 *    still passes.
 *  - balloon: free pages are not checked (their content does not matter),
 *    kept pages and the window's are; the state survives a migration.
 *  - load_state refuses hostile sections (sizes, counts, cursors, spec) with
 *    a reason, and setup_ram refuses layouts it cannot hold.
 *  - the backend table: every backend has a distinct name found by
 *    vmm_backend_by_name, a probe that answers with a reason; soft is in it
 *    and usable here (userfaultfd WP_ASYNC and PAGEMAP_SCAN).
 * Timing never decides: waits poll progress with a generous deadline.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include "mem/digest.h"
#include "mem/populated.h"
#include "util/state.h"
#include "vmm.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define MiB (1ull << 20)
#define PAGE 4096ull
#define VM_BYTES (64 * MiB)

/* The soft backend's engine callbacks, called here as the engine would. */
static const struct gw_vm_ops *ops;

static struct vmm *new_vm(uint64_t bytes, unsigned vcpus, enum vmm_fill fill, uint64_t seed,
			  const char *workload, bool incoming)
{
	struct vmm_config cfg = {
		.memory_bytes = bytes, .nr_vcpus = vcpus, .fill = fill, .seed = seed,
		.workload = workload, .incoming = incoming,
	};
	char err[256] = "";
	struct vmm *vm = vmm_soft.create(&cfg, err, sizeof(err));

	TEST_ASSERT(vm, "vmm_soft.create(%s, %s): %s", vmm_fill_name(fill),
		    workload ? workload : "idle", err);
	return vm;
}

/* The VM's workload spec (one buffer per call site pair is enough: two at a time). */
static const char *spec_of(struct vmm *vm)
{
	static char buf[2][VMM_WORKLOAD_SPEC_MAX];
	static unsigned n;
	char *b = buf[n++ % 2];

	vmm_soft.workload(vm, b, VMM_WORKLOAD_SPEC_MAX);
	return b;
}

static struct gw_digest digest(struct vmm *vm)
{
	struct gw_digest d;

	TEST_ASSERT(gw_ram_digest(vmm_soft.info(vm), 2, &d) == 0, "digest");
	return d;
}

static bool same(struct gw_digest a, struct gw_digest b)
{
	return a.lo == b.lo && a.hi == b.hi;
}

static void sleep_ms(unsigned ms)
{
	usleep(ms * 1000);
}

/* Wait until progress exceeds @target (deadline 30 s, never a pass criterion). */
/*
 * The post-migration check is the guest's first work after resume (not
 * part of resume itself): wait until it reported (liveness bound only).
 */
static int wait_post_check(struct vmm *vm, char *msg, size_t len)
{
	int ret = 0;

	for (int i = 0; i < 3000 && ret == 0; i++) {
		ret = vmm_soft.post_migration_check(vm, msg, len);
		if (ret == 0)
			usleep(10000);
	}
	return ret;
}

static uint64_t wait_progress(struct vmm *vm, uint64_t target)
{
	for (unsigned i = 0; i < 30000; i++) {
		uint64_t p = vmm_soft.progress(vm);

		if (p > target)
			return p;
		sleep_ms(1);
	}
	TEST_ASSERT(0, "progress stuck at %" PRIu64 " (want > %" PRIu64 ")",
		    vmm_soft.progress(vm), target);
	return 0;
}

static void test_fills(void)
{
	static const enum vmm_fill fills[] = {
		VMM_FILL_NONE, VMM_FILL_ZERO, VMM_FILL_MIX, VMM_FILL_RANDOM, VMM_FILL_TEXT,
	};
	struct gw_digest dnone = { 0, 0 };

	for (unsigned i = 0; i < sizeof(fills) / sizeof(fills[0]); i++) {
		struct vmm *a = new_vm(VM_BYTES, 2, fills[i], 1, NULL, false);
		struct vmm *b = new_vm(VM_BYTES, 1, fills[i], 1, NULL, false);
		struct vmm *c = new_vm(VM_BYTES, 1, fills[i], 2, NULL, false);
		struct gw_digest da = digest(a), db = digest(b), dc = digest(c);
		const struct gw_ram_block *blk = &vmm_soft.info(a)->blocks[0];
		enum vmm_fill parsed;

		TEST_CHECK(vmm_fill_parse(vmm_fill_name(fills[i]), &parsed) == 0 &&
			   parsed == fills[i], "parse %s", vmm_fill_name(fills[i]));
		TEST_CHECK(vmm_soft.state(a) == VMM_CREATED, "state %s",
			   vmm_state_name(vmm_soft.state(a)));
		TEST_CHECK(same(da, db), "%s: same seed, different content", vmm_fill_name(fills[i]));
		if (fills[i] == VMM_FILL_NONE)
			dnone = da;
		if (fills[i] == VMM_FILL_ZERO)
			TEST_CHECK(same(da, dnone), "zero fill differs from no fill");
		if (fills[i] >= VMM_FILL_MIX)
			TEST_CHECK(!same(da, dc), "%s: seed ignored", vmm_fill_name(fills[i]));
		else
			TEST_CHECK(same(da, dc), "%s: seed matters", vmm_fill_name(fills[i]));

		if (fills[i] != VMM_FILL_NONE) {
			struct gw_bitmap pop;
			ssize_t n;

			TEST_ASSERT(gw_bitmap_init(&pop, VM_BYTES / PAGE) == 0, "bitmap");
			n = gw_populated_scan(blk, &pop, NULL);
			TEST_CHECK(n == (ssize_t)(VM_BYTES / PAGE), "%s: %zd pages populated",
				   vmm_fill_name(fills[i]), n);
			gw_bitmap_free(&pop);
		}
		if (fills[i] == VMM_FILL_MIX) {
			uint64_t zeros = 0, pages = VM_BYTES / PAGE;

			for (uint64_t p = 0; p < pages; p++) {
				const uint64_t *w = (const uint64_t *)((uint8_t *)blk->host + p * PAGE);
				bool z = true;

				for (unsigned k = 0; k < PAGE / 8 && z; k++)
					z = w[k] == 0;
				zeros += z;
			}
			printf("mix: %.1f%% zero pages\n", 100.0 * zeros / pages);
			TEST_CHECK(zeros > pages / 5 && zeros < pages * 3 / 10,
				   "mix: %" PRIu64 " zero pages of %" PRIu64, zeros, pages);
		}
		if (fills[i] == VMM_FILL_TEXT || fills[i] == VMM_FILL_RANDOM) {
			size_t in = 16 * MiB, cap = ZSTD_compressBound(in);
			void *out = malloc(cap);
			size_t n;

			TEST_ASSERT(out, "malloc");
			n = ZSTD_compress(out, cap, blk->host, in, 1);
			TEST_ASSERT(!ZSTD_isError(n), "zstd");
			printf("%s: zstd -1 ratio %.2f\n", vmm_fill_name(fills[i]), (double)in / n);
			if (fills[i] == VMM_FILL_TEXT)
				TEST_CHECK((double)in / n > 2.5 && (double)in / n < 6,
					   "text compresses %.2fx", (double)in / n);
			else
				TEST_CHECK((double)in / n < 1.01, "random compresses %.2fx",
					   (double)in / n);
			free(out);
		}
		vmm_soft.destroy(a);
		vmm_soft.destroy(b);
		vmm_soft.destroy(c);
	}
}

static void test_pause_resume(const char *workload)
{
	struct vmm *vm = new_vm(VM_BYTES, 2, VMM_FILL_NONE, 3, workload, false);
	uint64_t p0, p1;
	char msg[256];

	TEST_ASSERT(vmm_soft.start(vm) == 0, "start");
	TEST_CHECK(vmm_soft.state(vm) == VMM_RUNNING, "state %s",
		   vmm_state_name(vmm_soft.state(vm)));
	p0 = wait_progress(vm, 0);
	wait_progress(vm, p0 + 10);
	TEST_ASSERT(ops->pause(vm) == 0, "pause");
	TEST_CHECK(vmm_soft.state(vm) == VMM_PAUSED, "state %s",
		   vmm_state_name(vmm_soft.state(vm)));
	p1 = vmm_soft.progress(vm);
	sleep_ms(30);
	TEST_CHECK(vmm_soft.progress(vm) == p1, "%s: progress moved while paused: %" PRIu64
		   " -> %" PRIu64, workload, p1, vmm_soft.progress(vm));
	TEST_ASSERT(ops->resume(vm) == 0, "resume");
	wait_progress(vm, p1);
	if (strncmp(workload, "dirty", 5) == 0) {
		/* Every page holds what the dirty workload's generations wrote over the fill. */
		TEST_CHECK(vmm_soft.check(vm, msg, sizeof(msg)) == 0, "%s: check: %s", workload, msg);
		printf("workload %s: %s\n", spec_of(vm), msg);
	}
	/* Throttled vCPUs still make progress; 100% is refused. */
	TEST_CHECK(ops->throttle(vm, 100) == -EINVAL, "throttle 100");
	TEST_ASSERT(ops->throttle(vm, 90) == 0, "throttle 90");
	wait_progress(vm, vmm_soft.progress(vm));
	TEST_ASSERT(ops->throttle(vm, 0) == 0, "throttle off");
	/* Pause twice, resume twice: idempotent. */
	TEST_CHECK(ops->pause(vm) == 0 && ops->pause(vm) == 0, "double pause");
	TEST_CHECK(ops->resume(vm) == 0 && ops->resume(vm) == 0, "double resume");
	vmm_soft.destroy(vm);
}

static struct vmm *verify_source(uint64_t *pages_out)
{
	struct vmm *vm = new_vm(VM_BYTES, 2, VMM_FILL_MIX, 7, "verify", false);
	char msg[256];
	int ret;

	TEST_CHECK(strcmp(spec_of(vm), "verify:ws=67108864") == 0, "spec %s",
		   spec_of(vm));
	/* Before any write every page is generation 0: the fill content. */
	ret = vmm_soft.check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "check before start: %d %s", ret, msg);
	TEST_ASSERT(vmm_soft.start(vm) == 0, "start");
	/* More than one pass, so that generations wrap. */
	wait_progress(vm, VM_BYTES / PAGE + VM_BYTES / PAGE / 3);
	*pages_out = VM_BYTES / PAGE;
	return vm;
}

static void test_verify_check(void)
{
	uint64_t pages;
	struct vmm *vm = verify_source(&pages);
	uint8_t *host = vmm_soft.info(vm)->blocks[0].host;
	char msg[256];
	int ret;

	ret = vmm_soft.check(vm, msg, sizeof(msg));	/* pauses and resumes by itself */
	TEST_CHECK(ret == 0, "check while running: %d %s", ret, msg);
	TEST_CHECK(vmm_soft.state(vm) == VMM_RUNNING, "still running");
	TEST_ASSERT(ops->pause(vm) == 0, "pause");
	ret = vmm_soft.check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "check paused: %d %s", ret, msg);
	printf("verify check: %s\n", msg);

	host[1234 * PAGE + 777] ^= 0x10;
	ret = vmm_soft.check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == -EIO && strstr(msg, "page 1234 "), "corruption: %d %s", ret, msg);
	printf("corrupted: %s\n", msg);
	host[1234 * PAGE + 777] ^= 0x10;
	ret = vmm_soft.check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "restored: %d %s", ret, msg);
	vmm_soft.destroy(vm);
}

/*
 * A page punched out of the memfd reads as zeros: the check says it was
 * never populated. The page punched holds data now (the workload's slices
 * progress unevenly on a busy host: a page it has not reached yet may still
 * hold a zero page of the fill, which a hole would not change).
 */
static void test_verify_hole(void)
{
	uint64_t pages, p;
	struct vmm *vm = verify_source(&pages);
	const struct gw_ram_block *b = &vmm_soft.info(vm)->blocks[0];
	char msg[256], want[32];
	uint8_t page[PAGE];
	int ret;

	TEST_ASSERT(ops->pause(vm) == 0, "pause");
	for (p = 4321; p < pages; p++) {
		TEST_ASSERT(pread(b->fd, page, PAGE, (off_t)(b->fd_offset_bytes + p * PAGE)) == PAGE, "pread");
		if (page[0] || memcmp(page, page + 1, PAGE - 1))
			break;
	}
	TEST_ASSERT(p < pages, "a page with data");
	TEST_ASSERT(fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)(b->fd_offset_bytes + p * PAGE), PAGE) == 0, "punch");
	ret = vmm_soft.check(vm, msg, sizeof(msg));
	snprintf(want, sizeof(want), "page %llu ", (unsigned long long)p);
	TEST_CHECK(ret == -EIO && strstr(msg, want) && strstr(msg, "never-populated"),
		   "hole at page %llu: %d %s", (unsigned long long)p, ret, msg);
	printf("hole: %s\n", msg);
	vmm_soft.destroy(vm);
}

static struct vmm *incoming_from(struct vmm *src, bool pass_fd, bool corrupt)
{
	struct vmm *dst = new_vm(0, 1, VMM_FILL_NONE, 0, NULL, true);
	struct gw_vm_info want = *vmm_soft.info(src), got;
	struct gw_ram_block blk[GW_MAX_RAM_BLOCKS];
	char reason[256] = "";
	int ret;

	TEST_CHECK(vmm_soft.state(dst) == VMM_INCOMING, "incoming state");
	want.blocks = blk;	/* the announced layout: a copy of the source's */
	for (unsigned i = 0; i < want.nr_blocks; i++) {
		blk[i] = vmm_soft.info(src)->blocks[i];
		want.blocks[i].host = NULL;
		want.blocks[i].fd = pass_fd ? dup(vmm_soft.info(src)->blocks[i].fd) : -1;
	}
	ret = ops->setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_ASSERT(ret == 0, "setup_ram: %d %s", ret, reason);
	TEST_CHECK(got.nr_blocks == 1 && got.blocks[0].size_bytes == VM_BYTES &&
		   !strcmp(got.blocks[0].name, "ram0"), "layout");
	if (!pass_fd)
		memcpy(got.blocks[0].host, vmm_soft.info(src)->blocks[0].host, VM_BYTES);
	if (corrupt)
		((uint8_t *)got.blocks[0].host)[100 * PAGE + 9] ^= 1;
	return dst;
}

static void test_migration(bool pass_fd)
{
	uint64_t pages, src_progress, p;
	struct vmm *src = verify_source(&pages);
	struct vmm *dst, *bad;
	struct gw_state *st = calloc(1, sizeof(*st));
	struct gw_digest dsrc;
	char msg[256];
	int ret;

	TEST_ASSERT(st, "calloc");
	gw_state_init(st);
	TEST_ASSERT(ops->pause(src) == 0, "pause");
	src_progress = vmm_soft.progress(src);
	TEST_ASSERT(ops->save_state(src, st) == 0, "save_state");
	dsrc = digest(src);

	dst = incoming_from(src, pass_fd, false);
	TEST_CHECK(vmm_soft.post_migration_check(dst, msg, sizeof(msg)) == 0, "not run yet");
	TEST_CHECK(same(digest(dst), dsrc), "RAM differs after copy");
	ret = ops->load_state(dst, st);
	TEST_ASSERT(ret == 0, "load_state: %d %s", ret, st->reject_reason);
	TEST_CHECK(vmm_soft.progress(dst) == src_progress, "progress %" PRIu64 " vs %" PRIu64,
		   vmm_soft.progress(dst), src_progress);
	TEST_CHECK(!strcmp(spec_of(dst), spec_of(src)), "workload %s",
		   spec_of(dst));
	TEST_CHECK(vmm_soft.info(dst)->nr_vcpus == 2, "vcpus from the source");
	vmm_soft.set_postmigrate(src);
	TEST_CHECK(ops->resume(src) == -EPERM, "postmigrate source resumed");
	TEST_CHECK(vmm_soft.state(src) == VMM_POSTMIGRATE, "source state");

	TEST_ASSERT(ops->resume(dst) == 0, "resume dst");
	ret = wait_post_check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == 1, "post-migration check %d: %s", ret, msg);
	p = wait_progress(dst, src_progress + 100);
	TEST_CHECK(p > src_progress, "progress continues");
	ret = vmm_soft.check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "check after running on dst: %d %s", ret, msg);
	vmm_soft.destroy(dst);

	/* A page lost or damaged in transit is caught on the first resume. */
	if (!pass_fd) {
		bad = incoming_from(src, false, true);
		TEST_ASSERT(ops->load_state(bad, st) == 0, "load_state");
		TEST_ASSERT(ops->resume(bad) == 0, "resume");
		ret = wait_post_check(bad, msg, sizeof(msg));
		TEST_CHECK(ret == -1 && strstr(msg, "page 100 "), "damaged: %d %s", ret, msg);
		printf("damaged in transit: %s\n", msg);
		vmm_soft.destroy(bad);
	}
	gw_state_release(st);
	free(st);
	vmm_soft.destroy(src);
}

static void test_dirty_first_resume(bool pass_fd)
{
	struct vmm *src = new_vm(VM_BYTES, 2, VMM_FILL_MIX, 7, "dirty:ws=16M,pattern=byte", false);
	struct gw_state *st = calloc(1, sizeof(*st));
	uint64_t src_progress;
	struct vmm *dst;
	char msg[256];
	int ret;

	TEST_ASSERT(st, "calloc");
	gw_state_init(st);
	TEST_ASSERT(vmm_soft.start(src) == 0, "start");
	wait_progress(src, 16 * MiB / PAGE);
	TEST_ASSERT(ops->pause(src) == 0, "pause");
	src_progress = vmm_soft.progress(src);
	TEST_ASSERT(ops->save_state(src, st) == 0, "save_state");
	dst = incoming_from(src, pass_fd, false);
	ret = ops->load_state(dst, st);
	TEST_ASSERT(ret == 0, "load_state: %d %s", ret, st->reject_reason);
	vmm_soft.set_postmigrate(src);
	TEST_ASSERT(ops->resume(dst) == 0, "resume dst");
	if (pass_fd) {
		ret = wait_post_check(dst, msg, sizeof(msg));
		TEST_CHECK(ret == 1, "shared RAM: post-migration check %d: %s", ret, msg);
	}
	wait_progress(dst, src_progress + 100);
	if (!pass_fd) {
		ret = vmm_soft.post_migration_check(dst, msg, sizeof(msg));
		TEST_CHECK(ret == 0, "copied RAM: the first resume checked (%d: %s)", ret, msg);
	}
	ret = vmm_soft.check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "%s RAM: check on request: %d %s", pass_fd ? "shared" : "copied",
		   ret, msg);
	vmm_soft.destroy(dst);
	gw_state_release(st);
	free(st);
	vmm_soft.destroy(src);
}

/* Load @blob as version @version of the section into a fresh destination. */
static int load_blob(struct vmm *src, uint32_t version, const uint8_t *blob, size_t len,
		     struct gw_state *st, struct vmm **dst)
{
	*dst = incoming_from(src, false, false);
	gw_state_init(st);
	TEST_ASSERT(gw_state_add(st, "soft-vcpus", version, blob, len) == 0, "add");
	return ops->load_state(*dst, st);
}

/* Rebuild the section with one field changed; it must be refused with a reason. */
static void expect_reject(struct vmm *src, const uint8_t *blob, size_t len, const char *what)
{
	struct gw_state *st = calloc(1, sizeof(*st));
	struct vmm *dst;
	int ret;

	TEST_ASSERT(st, "calloc");
	ret = load_blob(src, 2, blob, len, st, &dst);
	TEST_CHECK(ret == -EINVAL && st->reject_reason[0], "%s: accepted (%d)", what, ret);
	if (ret)
		printf("refused %s: %s\n", what, st->reject_reason);
	TEST_CHECK(ops->resume(dst) == -EINVAL, "%s: resumed without state", what);
	gw_state_release(st);
	free(st);
	vmm_soft.destroy(dst);
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* A version 1 section (24-byte vCPU records, no balloon fields) still loads. */
static void test_state_v1(struct vmm *src, const uint8_t *v2, size_t len, size_t spec_len)
{
	size_t head = 32 + spec_len, nr = (len - head) / 48, len1 = head + nr * 24;
	struct gw_state *st = calloc(1, sizeof(*st));
	uint8_t *v1 = malloc(len1);
	struct vmm *dst;
	char msg[256];
	int ret;

	TEST_ASSERT(st && v1, "alloc");
	memcpy(v1, v2, head);
	for (size_t i = 0; i < nr; i++)
		memcpy(v1 + head + i * 24, v2 + head + i * 48, 24);
	ret = load_blob(src, 1, v1, len1, st, &dst);
	TEST_CHECK(ret == 0, "version 1 refused: %s", st->reject_reason);
	TEST_CHECK(ops->resume(dst) == 0, "resume after a version 1 section");
	ret = wait_post_check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == 1, "check after a version 1 section: %d %s", ret, msg);
	gw_state_release(st);
	free(st);
	free(v1);
	vmm_soft.destroy(dst);
}

static void test_hostile_state(void)
{
	uint64_t pages;
	struct vmm *src = verify_source(&pages);
	struct gw_state *st = calloc(1, sizeof(*st));
	const uint8_t *orig;
	uint8_t *b;
	uint32_t version;
	size_t len, spec_len;

	TEST_ASSERT(st, "calloc");
	gw_state_init(st);
	TEST_ASSERT(ops->pause(src) == 0, "pause");
	TEST_ASSERT(ops->save_state(src, st) == 0, "save");
	orig = gw_state_find(st, "soft-vcpus", &version, &len);
	TEST_ASSERT(orig && version == 2, "section");
	spec_len = strlen(spec_of(src));
	b = malloc(len + 64);
	TEST_ASSERT(b, "malloc");

	memcpy(b, orig, len);
	expect_reject(src, b, 20, "truncated header");
	expect_reject(src, b, len - 1, "truncated vCPU");
	memcpy(b, orig, len); put32(b, 0);
	expect_reject(src, b, len, "0 vCPUs");
	memcpy(b, orig, len); put32(b, 65);
	expect_reject(src, b, len, "65 vCPUs");
	memcpy(b, orig, len); put32(b + 4, 0xffffffffu);
	expect_reject(src, b, len, "huge spec length");
	memcpy(b, orig, len); put32(b + 8, 9);
	expect_reject(src, b, len, "unknown fill");
	memcpy(b, orig, len); put64(b + 24, 12345);
	expect_reject(src, b, len, "wrong RAM size");
	memcpy(b, orig, len); memcpy(b + 32, "verify:ws=x", 11 < spec_len ? 11 : spec_len);
	expect_reject(src, b, len, "bad spec");
	memcpy(b, orig, len); put64(b + 32 + spec_len, VM_BYTES / PAGE / 2);
	expect_reject(src, b, len, "cursor past the slice");
	memcpy(b, orig, len); put64(b + 32 + spec_len + 8, 0);
	expect_reject(src, b, len, "generation 0");
	memcpy(b, orig, len); put32(b + 32 + spec_len + 24, 2);
	expect_reject(src, b, len, "phase 2");
	memcpy(b, orig, len); put32(b + 32 + spec_len + 24, 1);
	expect_reject(src, b, len, "balloon phase under verify");
	memcpy(b, orig, len); put32(b + 32 + spec_len + 28, 1);
	expect_reject(src, b, len, "reserved field");
	memcpy(b, orig, len); put64(b + 32 + spec_len + 32, 5);
	expect_reject(src, b, len, "churn in phase 0");
	memcpy(b, orig, len); put64(b + 32 + spec_len + 40, 0);
	expect_reject(src, b, len, "churn generation 0");
	memcpy(b, orig, len); memset(b + len, 0, 48);
	expect_reject(src, b, len + 48, "trailing bytes");
	test_state_v1(src, orig, len, spec_len);

	free(b);
	gw_state_release(st);
	free(st);
	vmm_soft.destroy(src);
}

/*
 * balloon: once filled (phase 1), a free page's content does not matter and
 * is not checked, while a kept page or a page of the window is. The free
 * pages are found from the saved section (vCPU 0's churn).
 */
static void test_balloon(void)
{
	const uint64_t pages = VM_BYTES / PAGE, half = pages / 2, keep = half / 8, window = 16;
	struct vmm *src = new_vm(VM_BYTES, 2, VMM_FILL_MIX, 3, "balloon:keep=8M,window=16", false);
	struct gw_state *st = calloc(1, sizeof(*st));
	uint64_t freed = half - keep, churn;
	const uint8_t *sec;
	uint8_t *host;
	uint32_t version, phase;
	size_t len, spec_len = strlen(spec_of(src));
	struct vmm *dst;
	char msg[256];
	int ret;

	TEST_ASSERT(st, "calloc");
	TEST_CHECK(!strcmp(spec_of(src), "balloon:ws=67108864,keep=8388608,window=16,rate=0"),
		   "spec %s", spec_of(src));
	TEST_ASSERT(vmm_soft.start(src) == 0, "start");
	wait_progress(src, pages + 4 * window);	/* filled, then churning */
	ret = vmm_soft.check(src, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "check while churning: %d %s", ret, msg);
	printf("balloon check: %s\n", msg);

	/* vCPU 0 may fill its half later than vCPU 1: look until it churns. */
	for (unsigned tries = 0;; tries++) {
		gw_state_init(st);
		TEST_ASSERT(ops->pause(src) == 0, "pause");
		TEST_ASSERT(ops->save_state(src, st) == 0, "save");
		sec = gw_state_find(st, "soft-vcpus", &version, &len);
		TEST_ASSERT(sec && len == 32 + spec_len + 2 * 48, "section");
		memcpy(&phase, sec + 32 + spec_len + 24, 4);
		memcpy(&churn, sec + 32 + spec_len + 32, 8);
		if (phase == 1 || tries == 3000)
			break;
		gw_state_release(st);
		TEST_ASSERT(ops->resume(src) == 0, "resume");
		sleep_ms(10);
	}
	TEST_ASSERT(phase == 1 && churn < freed, "vCPU 0 in phase %u, churn %" PRIu64, phase, churn);

	/* Scribble over every free page of vCPU 0 on the destination: still ok. */
	dst = incoming_from(src, false, false);
	host = vmm_soft.info(dst)->blocks[0].host;
	for (uint64_t k = 0; k < freed - window; k++)
		memset(host + (keep + (churn + k) % freed) * PAGE, 0x5a, PAGE);
	TEST_ASSERT(ops->load_state(dst, st) == 0, "load: %s", st->reject_reason);
	TEST_ASSERT(ops->resume(dst) == 0, "resume");
	ret = wait_post_check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == 1, "free pages were checked: %d %s", ret, msg);
	vmm_soft.destroy(dst);

	/* The page just behind churn is in use (the window): damage there is caught. */
	dst = incoming_from(src, false, false);
	host = vmm_soft.info(dst)->blocks[0].host;
	host[(keep + (churn + freed - 1) % freed) * PAGE + 100] ^= 1;
	TEST_ASSERT(ops->load_state(dst, st) == 0, "load: %s", st->reject_reason);
	TEST_ASSERT(ops->resume(dst) == 0, "resume");
	ret = wait_post_check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == -1, "damaged window page not caught: %d %s", ret, msg);
	printf("balloon window damage: %s\n", msg);
	vmm_soft.destroy(dst);

	/* And so is damage in the kept part. */
	dst = incoming_from(src, false, false);
	host = vmm_soft.info(dst)->blocks[0].host;
	host[7 * PAGE + 5] ^= 1;
	TEST_ASSERT(ops->load_state(dst, st) == 0, "load: %s", st->reject_reason);
	TEST_ASSERT(ops->resume(dst) == 0, "resume");
	ret = wait_post_check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == -1 && strstr(msg, "page 7 "), "damaged kept page: %d %s", ret, msg);
	vmm_soft.destroy(dst);

	gw_state_release(st);
	free(st);
	vmm_soft.destroy(src);
}

static void test_setup_ram_refusals(void)
{
	struct vmm *dst = new_vm(32 * MiB, 1, VMM_FILL_NONE, 0, NULL, true);
	struct gw_ram_block blk = { 0 };
	struct gw_vm_info want = { .size = sizeof(want), .nr_blocks = 1, .blocks = &blk, .kvm_vm_fd = -1,
				   .nr_vcpus = 1 }, got;
	char reason[256] = "";
	int ret;

	snprintf(want.blocks[0].name, sizeof(want.blocks[0].name), "ram0");
	want.blocks[0].size_bytes = VM_BYTES;
	want.blocks[0].page_size_bytes = PAGE;
	want.blocks[0].fd = -1;
	ret = ops->setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == -EINVAL && strstr(reason, "the source's guest RAM is 64M, this destination's VM was "
							 "made with --memory 32M: start it with --memory 64M"),
		   "mismatch: %d %s", ret, reason);
	printf("refused: %s\n", reason);
	want.blocks[0].size_bytes = 32 * MiB;
	want.blocks[0].page_size_bytes = 2 * MiB;
	ret = ops->setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == -EINVAL && strstr(reason, "page size"), "page size: %d %s", ret, reason);
	want.blocks[0].page_size_bytes = PAGE;
	want.blocks[0].size_bytes = 1ull << 50;
	ret = ops->setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == -EINVAL, "absurd size: %d %s", ret, reason);
	want.blocks[0].size_bytes = 32 * MiB;
	ret = ops->setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == 0, "identical layout: %d %s", ret, reason);
	vmm_soft.destroy(dst);
}

static void test_backend_table(void)
{
	static const enum vmm_state states[] = {
		VMM_CREATED, VMM_INCOMING, VMM_RUNNING, VMM_PAUSED, VMM_POSTMIGRATE, VMM_SHUTDOWN,
	};
	bool soft_listed = false;
	char why[256];

	for (unsigned i = 0; vmm_backends[i]; i++) {
		const struct vmm_backend *be = vmm_backends[i];
		int ret;

		TEST_CHECK(be->name && be->name[0], "backend %u has no name", i);
		TEST_CHECK(vmm_backend_by_name(be->name) == be, "%s not found by name", be->name);
		TEST_CHECK(be->create && be->destroy && be->start && be->info && be->engine_ops &&
			   be->state && be->set_postmigrate && be->progress && be->workload &&
			   be->check && be->post_migration_check && be->probe,
			   "%s: an operation is missing", be->name);
		why[0] = '\0';
		ret = be->probe(why, sizeof(why));
		TEST_CHECK(ret <= 0 && why[0], "%s: probe %d without a reason", be->name, ret);
		printf("backend %s: probe %d (%s)\n", be->name, ret, why);
		soft_listed |= be == &vmm_soft;
	}
	TEST_CHECK(soft_listed, "soft is not in the table");
	TEST_CHECK(vmm_soft.probe(why, sizeof(why)) == 0, "soft unusable here: %s", why);
	TEST_CHECK(!vmm_backend_by_name("auto") && !vmm_backend_by_name(NULL), "by_name");
	for (unsigned i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		TEST_CHECK(strcmp(vmm_state_name(states[i]), "?"), "state %u has no name", i);
}

static void test_bad_config(void)
{
	struct vmm_config cfg = { .memory_bytes = VM_BYTES, .nr_vcpus = 1 };
	char err[256];

	cfg.workload = "bogus";
	TEST_CHECK(!vmm_soft.create(&cfg, err, sizeof(err)) && err[0], "bogus workload");
	cfg.workload = "dirty:ws=1Q";
	TEST_CHECK(!vmm_soft.create(&cfg, err, sizeof(err)) && err[0], "bad size");
	cfg.workload = "verify:pattern=page";
	TEST_CHECK(!vmm_soft.create(&cfg, err, sizeof(err)) && err[0], "option of another workload");
	cfg.workload = NULL;
	cfg.nr_vcpus = 65;
	TEST_CHECK(!vmm_soft.create(&cfg, err, sizeof(err)), "65 vcpus");
	cfg.nr_vcpus = 1;
	cfg.memory_bytes = 4097;
	TEST_CHECK(!vmm_soft.create(&cfg, err, sizeof(err)), "unaligned memory");
}

int main(void)
{
	ops = vmm_soft.engine_ops;
	test_backend_table();
	test_bad_config();
	test_fills();
	test_pause_resume("idle");
	test_pause_resume("dirty:ws=16M,pattern=page");
	test_pause_resume("dirty:ws=16M,pattern=byte,rate=20000");
	test_pause_resume("dirty:ws=1M,pattern=byte");	/* past 64 generations: every word position */
	test_verify_check();
	test_verify_hole();
	test_migration(false);
	test_migration(true);
	test_dirty_first_resume(false);
	test_dirty_first_resume(true);
	test_hostile_state();
	test_balloon();
	test_setup_ram_refusals();
	TEST_EXIT();
}
