/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a program built against the first version of libgodwit's
 * growable ABI runs against this library. Built with abi_ver0.h (the frozen
 * structs, no installed header) and linked with the installed library, it
 * migrates 16 MiB between two sessions as examples/embed.c does, with its
 * own (version 0) gw_vm_info and gw_vm_ops, and then checks the rule of
 * libgodwit(3): the library fills what both sides know and writes nothing
 * past the caller's size; it zeroes what it does not know of a larger
 * struct; it refuses a size below version 0 (EINVAL) and a larger struct
 * with bytes it does not know set (E2BIG); table rows end with ENOENT.
 *
 * Built with -DABI_LAYOUT_CURRENT against the installed headers instead, it
 * only prints the offset and size of every version-0 field
 * (abi_ver0_fields.h); test_install.sh compares that with the frozen build's
 * `layout` output: fields are appended, never moved.
 *
 * Usage: abi_ver0 [layout]. Exit 0 pass, 77 no dirty tracking here (the
 * layout and size checks ran), 1 fail.
 */
#define _GNU_SOURCE		/* memfd_create */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef ABI_LAYOUT_CURRENT
#include <godwit/godwit.h>
#else
#include "abi_ver0.h"
#endif
#include "abi_ver0_fields.h"

#define PRINT_FIELD(s, f) \
	printf("%s.%s %zu %zu\n", #s, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f));

static void layout(void)
{
	ABI_VER0_FIELDS(PRINT_FIELD)
}

#ifdef ABI_LAYOUT_CURRENT
int main(void)
{
	layout();
	return 0;
}
#else

#define RAM_BYTES (16u << 20)
#define CANARY 0xa5
#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
	printf(__VA_ARGS__); printf("\n"); exit(1); } } while (0)

struct vm {
	struct gw_ram_block block;
	void *ram;
};

static int vm_pause(void *opaque) { (void)opaque; return 0; }
static void later_hook(void) {}
static int vm_resume(void *opaque) { (void)opaque; return 0; }
static int vm_save(void *opaque, struct gw_state *st) { (void)opaque; return gw_state_add(st, "x", 1, "x", 1); }
static int vm_load(void *opaque, struct gw_state *st)
{
	(void)opaque;
	return gw_state_find(st, "x", NULL, NULL) ? 0 : -EINVAL;
}

static const struct gw_vm_ops ops = {
	.size = sizeof(struct gw_vm_ops),
	.pause = vm_pause, .resume = vm_resume, .save_state = vm_save, .load_state = vm_load,
};

static void vm_init(struct vm *vm, struct gw_vm_info *info, const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	CHECK(fd >= 0 && ftruncate(fd, RAM_BYTES) == 0, "memfd");
	vm->ram = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(vm->ram != MAP_FAILED, "mmap");
	memset(&vm->block, 0, sizeof(vm->block));
	snprintf(vm->block.name, sizeof(vm->block.name), "ram0");
	vm->block.host = vm->ram;
	vm->block.size_bytes = RAM_BYTES;
	vm->block.page_size_bytes = GW_PAGE_BYTES;
	vm->block.fd = fd;
	*info = (struct gw_vm_info){ .size = sizeof(*info), .nr_blocks = 1, .blocks = &vm->block,
				     .kvm_vm_fd = -1, .kvm_dirty_ring_full_efd = -1 };
}

static bool all(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* The sizes a version-0 caller can give, against a session in any state. */
static void check_sizes(struct gw_session *s)
{
	struct { struct gw_stats st; unsigned char canary[512]; } old;
	struct { struct gw_stats st; unsigned char later[64]; unsigned char canary[64]; } newer;
	struct { struct gw_round_stats r; unsigned char canary[64]; } row;

	/* Older than version 0: refused, nothing written. */
	memset(&old, CANARY, sizeof(old));
	old.st.size = sizeof(old.st) - 8;
	CHECK(gw_session_stats(s, &old.st) == -EINVAL, "size below version 0 accepted");
	CHECK(all((unsigned char *)&old + 4, sizeof(old) - 4, CANARY), "refused call wrote");
	/* Version 0: its fields, nothing past them. */
	old.st.size = sizeof(old.st);
	CHECK(gw_session_stats(s, &old.st) == 0, "version-0 stats refused");
	CHECK(old.st.size == sizeof(old.st), "size changed to %u", old.st.size);
	CHECK(all(old.canary, sizeof(old.canary), CANARY), "wrote past the caller's gw_stats");
	/* A later caller: what this library does not know reads as 0, nothing past its size. */
	memset(&newer, CANARY, sizeof(newer));
	newer.st.size = sizeof(newer.st) + sizeof(newer.later);
	CHECK(gw_session_stats(s, &newer.st) == 0, "larger gw_stats refused");
	CHECK(!memcmp((char *)&newer.st + 4, (char *)&old.st + 4, offsetof(struct gw_stats, total_time_ns) - 4),
	      "larger gw_stats filled differently");
	CHECK(all(newer.canary, sizeof(newer.canary), CANARY), "wrote past a larger caller's size");
	/* (That the bytes this library does not know come back 0 is tests/unit/util/test_abi.c's.) */
	/* Rows: -ENOENT past the table, nothing written. */
	memset(&row, CANARY, sizeof(row));
	row.r.size = sizeof(row.r);
	CHECK(gw_session_round(s, 100000, &row.r) == -ENOENT, "round past the end");
	CHECK(all((unsigned char *)&row + 4, sizeof(row) - 4, CANARY), "ENOENT wrote");
	row.r.size = 8;
	CHECK(gw_session_round(s, 0, &row.r) == -EINVAL, "round size below version 0 accepted");
}

/* gw_session_new takes version 0 and refuses what it must. */
static void check_new(const struct gw_vm_info *info, struct vm *vm)
{
	struct { struct gw_vm_ops ops; void (*later)(void); } big = { ops, NULL };
	struct gw_vm_info bad = *info;
	struct gw_session *s;

	big.ops.size = sizeof(big);
	s = gw_session_new(GW_ROLE_SOURCE, info, &big.ops, vm);
	CHECK(s, "larger ops with a zero tail refused: %s", strerror(errno));
	gw_session_free(s);
	big.later = later_hook;
	errno = 0;
	CHECK(!gw_session_new(GW_ROLE_SOURCE, info, &big.ops, vm) && errno == E2BIG,
	      "a hook the library does not know accepted (errno %d)", errno);
	bad.size = 8;
	errno = 0;
	CHECK(!gw_session_new(GW_ROLE_SOURCE, &bad, &ops, vm) && errno == EINVAL,
	      "gw_vm_info below version 0 accepted (errno %d)", errno);
}

int main(int argc, char **argv)
{
	struct vm src, dst;
	struct gw_vm_info src_info, dst_info;
	struct { struct gw_stats st; unsigned char canary[256]; } ss, ds;
	struct { struct gw_round_stats r; unsigned char canary[64]; } row;
	struct { struct gw_channel_stats c; unsigned char canary[64]; } ch;
	struct gw_vcpu_stats vc = { .size = sizeof(vc) };
	struct gw_session *in, *out;
	char url[64], why[256];
	uint64_t sum = 0;
	unsigned n;
	int ret;

	if (argc > 1 && !strcmp(argv[1], "layout")) {
		layout();
		return 0;
	}
	printf("libgodwit %s, caller built with the version-0 ABI\n", gw_version());
	vm_init(&src, &src_info, "src");
	vm_init(&dst, &dst_info, "dst");
	check_new(&src_info, &src);
	in = gw_session_new(GW_ROLE_DEST, &dst_info, &ops, &dst);
	CHECK(in, "destination session: %s", strerror(errno));
	check_sizes(in);
	if (gw_dirty_probe(GW_DIRTY_AUTO, &src_info, why, sizeof(why))) {
		printf("sizes checked; no migration: no dirty tracking here: %s\n", why);
		gw_session_free(in);
		return 77;
	}
	for (size_t i = 0; i < RAM_BYTES; i += GW_PAGE_BYTES)
		memset((char *)src.ram + i, (int)(i / GW_PAGE_BYTES % 251) + 1, 64);
	snprintf(url, sizeof(url), "unix:/tmp/godwit-abi0-%d.sock", (int)getpid());
	out = gw_session_new(GW_ROLE_SOURCE, &src_info, &ops, &src);
	CHECK(out && gw_incoming_start(in, url) == 0, "sessions");
	ret = gw_migrate_start(out, url);
	if (!ret)
		ret = gw_session_wait(out);
	if (!ret)
		ret = gw_session_wait(in);
	CHECK(!ret, "migration: %s", gw_session_error(out, why, sizeof(why)));
	CHECK(!memcmp(src.ram, dst.ram, RAM_BYTES), "RAM differs");

	memset(&ss, CANARY, sizeof(ss));
	memset(&ds, CANARY, sizeof(ds));
	ss.st.size = ds.st.size = sizeof(ss.st);
	CHECK(gw_session_stats(out, &ss.st) == 0 && gw_session_stats(in, &ds.st) == 0, "stats");
	CHECK(all(ss.canary, sizeof(ss.canary), CANARY) && all(ds.canary, sizeof(ds.canary), CANARY),
	      "wrote past gw_stats");
	CHECK(ss.st.status == GW_STATUS_COMPLETED && ds.st.status == GW_STATUS_COMPLETED, "status %d %d",
	      ss.st.status, ds.st.status);
	CHECK(ss.st.ram_total_bytes == RAM_BYTES && ss.st.rounds >= 1 && ss.st.nr_rounds_kept >= 1 &&
	      ss.st.nr_channels >= 1 && ss.st.transferred_bytes > 0, "source figures");
	/* The tables, a row at a time, each a version-0 struct with a canary behind it. */
	for (n = 0;; n++) {
		memset(&row, CANARY, sizeof(row));
		row.r.size = sizeof(row.r);
		if ((ret = gw_session_round(out, n, &row.r)))
			break;
		CHECK(row.r.round == n && all(row.canary, sizeof(row.canary), CANARY), "round row %u", n);
	}
	CHECK(ret == -ENOENT && n == ss.st.nr_rounds_kept, "rounds: %u rows of %u, then %d", n,
	      ss.st.nr_rounds_kept, ret);
	for (n = 0;; n++) {
		memset(&ch, CANARY, sizeof(ch));
		ch.c.size = sizeof(ch.c);
		if ((ret = gw_session_channel(out, n, &ch.c)))
			break;
		CHECK(ch.c.channel == n && all(ch.canary, sizeof(ch.canary), CANARY), "channel row %u", n);
		sum += ch.c.bytes;
	}
	CHECK(ret == -ENOENT && n == ss.st.nr_channels && sum > 0 && sum <= ss.st.transferred_bytes,
	      "channels: %u rows of %u, %llu bytes of %llu", n, ss.st.nr_channels,
	      (unsigned long long)sum, (unsigned long long)ss.st.transferred_bytes);
	CHECK(gw_session_vcpu(in, 0, &vc) == -ENOENT, "a vCPU row without postcopy");
	printf("migrated %u MiB: %u rounds, %u channels, %llu bytes; version-0 structs filled, "
	       "nothing past them\n", RAM_BYTES >> 20, ss.st.rounds, ss.st.nr_channels,
	       (unsigned long long)ss.st.transferred_bytes);
	gw_session_free(out);
	gw_session_free(in);
	return 0;
}
#endif
