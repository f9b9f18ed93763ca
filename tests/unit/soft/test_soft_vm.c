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
 *  - load_state refuses hostile sections (sizes, counts, cursors, spec) with
 *    a reason, and setup_ram refuses layouts it cannot hold.
 * Timing never decides: waits poll progress with a generous deadline.
 */
#include <inttypes.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include "mem/digest.h"
#include "mem/populated.h"
#include "state.h"
#include "soft/soft_vm.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define MiB (1ull << 20)
#define PAGE 4096ull
#define VM_BYTES (64 * MiB)

static struct soft_vm *new_vm(uint64_t bytes, unsigned vcpus, enum vmm_fill fill, uint64_t seed,
			      const char *workload, bool incoming)
{
	struct soft_vm_config cfg = {
		.memory_bytes = bytes, .nr_vcpus = vcpus, .fill = fill, .seed = seed,
		.workload = workload, .incoming = incoming,
	};
	char err[256] = "";
	struct soft_vm *vm = soft_vm_new(&cfg, err, sizeof(err));

	TEST_ASSERT(vm, "soft_vm_new(%s, %s): %s", vmm_fill_name(fill),
		    workload ? workload : "idle", err);
	return vm;
}

static struct gw_digest digest(struct soft_vm *vm)
{
	struct gw_digest d;

	TEST_ASSERT(gw_ram_digest(soft_vm_info(vm), 2, &d) == 0, "digest");
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
static int wait_post_check(struct soft_vm *vm, char *msg, size_t len)
{
	int ret = 0;

	for (int i = 0; i < 3000 && ret == 0; i++) {
		ret = soft_vm_post_migration_check(vm, msg, len);
		if (ret == 0)
			usleep(10000);
	}
	return ret;
}

static uint64_t wait_progress(struct soft_vm *vm, uint64_t target)
{
	for (unsigned i = 0; i < 30000; i++) {
		uint64_t p = soft_vm_progress(vm);

		if (p > target)
			return p;
		sleep_ms(1);
	}
	TEST_ASSERT(0, "progress stuck at %" PRIu64 " (want > %" PRIu64 ")",
		    soft_vm_progress(vm), target);
	return 0;
}

static void test_fills(void)
{
	static const enum vmm_fill fills[] = {
		VMM_FILL_NONE, VMM_FILL_ZERO, VMM_FILL_MIX, VMM_FILL_RANDOM, VMM_FILL_TEXT,
	};
	struct gw_digest dnone = { 0, 0 };

	for (unsigned i = 0; i < sizeof(fills) / sizeof(fills[0]); i++) {
		struct soft_vm *a = new_vm(VM_BYTES, 2, fills[i], 1, NULL, false);
		struct soft_vm *b = new_vm(VM_BYTES, 1, fills[i], 1, NULL, false);
		struct soft_vm *c = new_vm(VM_BYTES, 1, fills[i], 2, NULL, false);
		struct gw_digest da = digest(a), db = digest(b), dc = digest(c);
		const struct gw_ram_block *blk = &soft_vm_info(a)->blocks[0];
		enum vmm_fill parsed;

		TEST_CHECK(vmm_fill_parse(vmm_fill_name(fills[i]), &parsed) == 0 &&
			   parsed == fills[i], "parse %s", vmm_fill_name(fills[i]));
		TEST_CHECK(soft_vm_state(a) == SOFT_VM_CREATED, "state %s",
			   soft_vm_state_name(soft_vm_state(a)));
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
		soft_vm_free(a);
		soft_vm_free(b);
		soft_vm_free(c);
	}
}

static void test_pause_resume(const char *workload)
{
	struct soft_vm *vm = new_vm(VM_BYTES, 2, VMM_FILL_NONE, 3, workload, false);
	uint64_t p0, p1;
	char msg[256];

	TEST_ASSERT(soft_vm_start(vm) == 0, "start");
	TEST_CHECK(soft_vm_state(vm) == SOFT_VM_RUNNING, "state %s",
		   soft_vm_state_name(soft_vm_state(vm)));
	p0 = wait_progress(vm, 0);
	wait_progress(vm, p0 + 10);
	TEST_ASSERT(soft_vm_ops.pause(vm) == 0, "pause");
	TEST_CHECK(soft_vm_state(vm) == SOFT_VM_PAUSED, "state %s",
		   soft_vm_state_name(soft_vm_state(vm)));
	p1 = soft_vm_progress(vm);
	sleep_ms(30);
	TEST_CHECK(soft_vm_progress(vm) == p1, "%s: progress moved while paused: %" PRIu64
		   " -> %" PRIu64, workload, p1, soft_vm_progress(vm));
	TEST_ASSERT(soft_vm_ops.resume(vm) == 0, "resume");
	wait_progress(vm, p1);
	if (strncmp(workload, "dirty", 5) == 0) {
		TEST_CHECK(soft_vm_check(vm, msg, sizeof(msg)) == -EOPNOTSUPP, "dirty check");
		printf("workload %s\n", soft_vm_workload(vm));
	}
	/* Throttled vCPUs still make progress; 100% is refused. */
	TEST_CHECK(soft_vm_ops.throttle(vm, 100) == -EINVAL, "throttle 100");
	TEST_ASSERT(soft_vm_ops.throttle(vm, 90) == 0, "throttle 90");
	wait_progress(vm, soft_vm_progress(vm));
	TEST_ASSERT(soft_vm_ops.throttle(vm, 0) == 0, "throttle off");
	/* Pause twice, resume twice: idempotent. */
	TEST_CHECK(soft_vm_ops.pause(vm) == 0 && soft_vm_ops.pause(vm) == 0, "double pause");
	TEST_CHECK(soft_vm_ops.resume(vm) == 0 && soft_vm_ops.resume(vm) == 0, "double resume");
	soft_vm_free(vm);
}

static struct soft_vm *verify_source(uint64_t *pages_out)
{
	struct soft_vm *vm = new_vm(VM_BYTES, 2, VMM_FILL_MIX, 7, "verify", false);
	char msg[256];
	int ret;

	TEST_CHECK(strcmp(soft_vm_workload(vm), "verify:ws=67108864") == 0, "spec %s",
		   soft_vm_workload(vm));
	/* Before any write every page is generation 0: the fill content. */
	ret = soft_vm_check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "check before start: %d %s", ret, msg);
	TEST_ASSERT(soft_vm_start(vm) == 0, "start");
	/* More than one pass, so that generations wrap. */
	wait_progress(vm, VM_BYTES / PAGE + VM_BYTES / PAGE / 3);
	*pages_out = VM_BYTES / PAGE;
	return vm;
}

static void test_verify_check(void)
{
	uint64_t pages;
	struct soft_vm *vm = verify_source(&pages);
	uint8_t *host = soft_vm_info(vm)->blocks[0].host;
	char msg[256];
	int ret;

	ret = soft_vm_check(vm, msg, sizeof(msg));	/* pauses and resumes by itself */
	TEST_CHECK(ret == 0, "check while running: %d %s", ret, msg);
	TEST_CHECK(soft_vm_state(vm) == SOFT_VM_RUNNING, "still running");
	TEST_ASSERT(soft_vm_ops.pause(vm) == 0, "pause");
	ret = soft_vm_check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "check paused: %d %s", ret, msg);
	printf("verify check: %s\n", msg);

	host[1234 * PAGE + 777] ^= 0x10;
	ret = soft_vm_check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == -EIO && strstr(msg, "page 1234 "), "corruption: %d %s", ret, msg);
	printf("corrupted: %s\n", msg);
	host[1234 * PAGE + 777] ^= 0x10;
	ret = soft_vm_check(vm, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "restored: %d %s", ret, msg);
	soft_vm_free(vm);
}

static struct soft_vm *incoming_from(struct soft_vm *src, bool pass_fd, bool corrupt)
{
	struct soft_vm *dst = new_vm(0, 1, VMM_FILL_NONE, 0, NULL, true);
	struct gw_vm_info want = *soft_vm_info(src), got;
	char reason[256] = "";
	int ret;

	TEST_CHECK(soft_vm_state(dst) == SOFT_VM_INCOMING, "incoming state");
	for (unsigned i = 0; i < want.nr_blocks; i++) {
		want.blocks[i].host = NULL;
		want.blocks[i].fd = pass_fd ? dup(soft_vm_info(src)->blocks[i].fd) : -1;
	}
	ret = soft_vm_ops.setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_ASSERT(ret == 0, "setup_ram: %d %s", ret, reason);
	TEST_CHECK(got.nr_blocks == 1 && got.blocks[0].size_bytes == VM_BYTES &&
		   !strcmp(got.blocks[0].name, "ram0"), "layout");
	if (!pass_fd)
		memcpy(got.blocks[0].host, soft_vm_info(src)->blocks[0].host, VM_BYTES);
	if (corrupt)
		((uint8_t *)got.blocks[0].host)[100 * PAGE + 9] ^= 1;
	return dst;
}

static void test_migration(bool pass_fd)
{
	uint64_t pages, src_progress, p;
	struct soft_vm *src = verify_source(&pages);
	struct soft_vm *dst, *bad;
	struct gw_state *st = calloc(1, sizeof(*st));
	struct gw_digest dsrc;
	char msg[256];
	int ret;

	TEST_ASSERT(st, "calloc");
	gw_state_init(st);
	TEST_ASSERT(soft_vm_ops.pause(src) == 0, "pause");
	src_progress = soft_vm_progress(src);
	TEST_ASSERT(soft_vm_ops.save_state(src, st) == 0, "save_state");
	dsrc = digest(src);

	dst = incoming_from(src, pass_fd, false);
	TEST_CHECK(soft_vm_post_migration_check(dst, msg, sizeof(msg)) == 0, "not run yet");
	TEST_CHECK(same(digest(dst), dsrc), "RAM differs after copy");
	ret = soft_vm_ops.load_state(dst, st);
	TEST_ASSERT(ret == 0, "load_state: %d %s", ret, st->reject_reason);
	TEST_CHECK(soft_vm_progress(dst) == src_progress, "progress %" PRIu64 " vs %" PRIu64,
		   soft_vm_progress(dst), src_progress);
	TEST_CHECK(!strcmp(soft_vm_workload(dst), soft_vm_workload(src)), "workload %s",
		   soft_vm_workload(dst));
	TEST_CHECK(soft_vm_info(dst)->nr_vcpus == 2, "vcpus from the source");
	soft_vm_set_postmigrate(src);
	TEST_CHECK(soft_vm_ops.resume(src) == -EPERM, "postmigrate source resumed");
	TEST_CHECK(soft_vm_state(src) == SOFT_VM_POSTMIGRATE, "source state");

	TEST_ASSERT(soft_vm_ops.resume(dst) == 0, "resume dst");
	ret = wait_post_check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == 1, "post-migration check %d: %s", ret, msg);
	p = wait_progress(dst, src_progress + 100);
	TEST_CHECK(p > src_progress, "progress continues");
	ret = soft_vm_check(dst, msg, sizeof(msg));
	TEST_CHECK(ret == 0, "check after running on dst: %d %s", ret, msg);
	soft_vm_free(dst);

	/* A page lost or damaged in transit is caught on the first resume. */
	if (!pass_fd) {
		bad = incoming_from(src, false, true);
		TEST_ASSERT(soft_vm_ops.load_state(bad, st) == 0, "load_state");
		TEST_ASSERT(soft_vm_ops.resume(bad) == 0, "resume");
		ret = wait_post_check(bad, msg, sizeof(msg));
		TEST_CHECK(ret == -1 && strstr(msg, "page 100 "), "damaged: %d %s", ret, msg);
		printf("damaged in transit: %s\n", msg);
		soft_vm_free(bad);
	}
	gw_state_release(st);
	free(st);
	soft_vm_free(src);
}

/* Rebuild the section with one field changed; it must be refused with a reason. */
static void expect_reject(struct soft_vm *src, const uint8_t *blob, size_t len, const char *what)
{
	struct gw_state *st = calloc(1, sizeof(*st));
	struct soft_vm *dst = incoming_from(src, false, false);
	int ret;

	TEST_ASSERT(st, "calloc");
	gw_state_init(st);
	TEST_ASSERT(gw_state_add(st, "soft-vcpus", 1, blob, len) == 0, "add");
	ret = soft_vm_ops.load_state(dst, st);
	TEST_CHECK(ret == -EINVAL && st->reject_reason[0], "%s: accepted (%d)", what, ret);
	if (ret)
		printf("refused %s: %s\n", what, st->reject_reason);
	TEST_CHECK(soft_vm_ops.resume(dst) == -EINVAL, "%s: resumed without state", what);
	gw_state_release(st);
	free(st);
	soft_vm_free(dst);
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void test_hostile_state(void)
{
	uint64_t pages;
	struct soft_vm *src = verify_source(&pages);
	struct gw_state *st = calloc(1, sizeof(*st));
	const uint8_t *orig;
	uint8_t *b;
	uint32_t version;
	size_t len, spec_len;

	TEST_ASSERT(st, "calloc");
	gw_state_init(st);
	TEST_ASSERT(soft_vm_ops.pause(src) == 0, "pause");
	TEST_ASSERT(soft_vm_ops.save_state(src, st) == 0, "save");
	orig = gw_state_find(st, "soft-vcpus", &version, &len);
	TEST_ASSERT(orig && version == 1, "section");
	spec_len = strlen(soft_vm_workload(src));
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
	memcpy(b, orig, len); memset(b + len, 0, 24);
	expect_reject(src, b, len + 24, "trailing bytes");

	free(b);
	gw_state_release(st);
	free(st);
	soft_vm_free(src);
}

static void test_setup_ram_refusals(void)
{
	struct soft_vm *dst = new_vm(32 * MiB, 1, VMM_FILL_NONE, 0, NULL, true);
	struct gw_vm_info want = { .nr_blocks = 1, .kvm_vm_fd = -1, .nr_vcpus = 1 }, got;
	char reason[256] = "";
	int ret;

	snprintf(want.blocks[0].name, sizeof(want.blocks[0].name), "ram0");
	want.blocks[0].size_bytes = VM_BYTES;
	want.blocks[0].page_size_bytes = PAGE;
	want.blocks[0].fd = -1;
	ret = soft_vm_ops.setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == -EINVAL && strstr(reason, "layout mismatch: source ram0 is 67108864 bytes"),
		   "mismatch: %d %s", ret, reason);
	printf("refused: %s\n", reason);
	want.blocks[0].size_bytes = 32 * MiB;
	want.blocks[0].page_size_bytes = 2 * MiB;
	ret = soft_vm_ops.setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == -EINVAL && strstr(reason, "page size"), "page size: %d %s", ret, reason);
	want.blocks[0].page_size_bytes = PAGE;
	want.blocks[0].size_bytes = 1ull << 50;
	ret = soft_vm_ops.setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == -EINVAL, "absurd size: %d %s", ret, reason);
	want.blocks[0].size_bytes = 32 * MiB;
	ret = soft_vm_ops.setup_ram(dst, &want, &got, reason, sizeof(reason));
	TEST_CHECK(ret == 0, "identical layout: %d %s", ret, reason);
	soft_vm_free(dst);
}

static void test_bad_config(void)
{
	struct soft_vm_config cfg = { .memory_bytes = VM_BYTES, .nr_vcpus = 1 };
	char err[256];

	cfg.workload = "bogus";
	TEST_CHECK(!soft_vm_new(&cfg, err, sizeof(err)) && err[0], "bogus workload");
	cfg.workload = "dirty:ws=1Q";
	TEST_CHECK(!soft_vm_new(&cfg, err, sizeof(err)) && err[0], "bad size");
	cfg.workload = "verify:pattern=page";
	TEST_CHECK(!soft_vm_new(&cfg, err, sizeof(err)) && err[0], "option of another workload");
	cfg.workload = NULL;
	cfg.nr_vcpus = 65;
	TEST_CHECK(!soft_vm_new(&cfg, err, sizeof(err)), "65 vcpus");
	cfg.nr_vcpus = 1;
	cfg.memory_bytes = 4097;
	TEST_CHECK(!soft_vm_new(&cfg, err, sizeof(err)), "unaligned memory");
}

int main(void)
{
	test_bad_config();
	test_fills();
	test_pause_resume("idle");
	test_pause_resume("dirty:ws=16M,pattern=page");
	test_pause_resume("dirty:ws=16M,pattern=byte,rate=20000");
	test_verify_check();
	test_migration(false);
	test_migration(true);
	test_hostile_state();
	test_setup_ram_refusals();
	TEST_EXIT();
}
