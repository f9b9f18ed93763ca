/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the copies between a caller's size-prefixed struct and the
 * library's (util/abi.c) follow libgodwit(3)'s ABI rule, in both directions
 * and for both an older (smaller) and a newer (larger) caller. In: the
 * bytes both know are copied, the library's fields past the caller's size
 * read 0, a size below the first version is -EINVAL, a larger struct is
 * taken when the bytes the library does not know are 0 and refused with
 * -E2BIG otherwise, and the library's copy says its own size. Out: the
 * caller's size field stays, the bytes both know are copied, the caller's
 * bytes the library does not know become 0, and nothing past the caller's
 * size is written. Then the same through gw_vm_ops_copy_in: hooks past an
 * older table's size are NULL.
 */
#include "util/abi.h"
#include "test_util.h"

#include <errno.h>
#include <string.h>
#include <godwit/vm.h>

TEST_DEFINE_FAILURES;

/* A struct in two versions: v1 appended two fields to v0. */
struct v0 { uint32_t size; uint32_t a; uint64_t b; };
struct v1 { uint32_t size; uint32_t a; uint64_t b; uint64_t c; uint64_t d; };

static bool all(const void *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (((const unsigned char *)p)[i] != v)
			return false;
	return true;
}

static void copy_in(void)
{
	struct v0 old = { .size = sizeof(old), .a = 1, .b = 2 };
	struct { struct v1 s; uint64_t e; } newer = { { sizeof(newer), 1, 2, 3, 4 }, 0 };
	struct v1 lib;

	/* Older caller into a newer library: the fields it lacks read 0. */
	memset(&lib, 0xa5, sizeof(lib));
	TEST_CHECK(gw_abi_copy_in(&lib, sizeof(lib), &old, old.size, sizeof(struct v0)) == 0, "older in");
	TEST_CHECK(lib.size == sizeof(lib) && lib.a == 1 && lib.b == 2 && lib.c == 0 && lib.d == 0,
		   "older in: size %u a %u b %llu c %llu d %llu", lib.size, lib.a, (unsigned long long)lib.b,
		   (unsigned long long)lib.c, (unsigned long long)lib.d);
	/* Below the first version. */
	TEST_CHECK(gw_abi_copy_in(&lib, sizeof(lib), &old, 8, sizeof(struct v0)) == -EINVAL, "below v0");
	/* Newer caller, fields the library lacks 0: taken; set: refused. */
	TEST_CHECK(gw_abi_copy_in(&lib, sizeof(lib), &newer, newer.s.size, sizeof(struct v0)) == 0 &&
		   lib.c == 3 && lib.d == 4, "newer in, zero tail");
	newer.e = 5;
	TEST_CHECK(gw_abi_copy_in(&lib, sizeof(lib), &newer, newer.s.size, sizeof(struct v0)) == -E2BIG,
		   "newer in, a field the library does not know");
}

static void copy_out(void)
{
	struct v1 lib = { sizeof(lib), 1, 2, 3, 4 };
	struct { struct v0 s; unsigned char canary[32]; } old;
	struct { struct v1 s; uint64_t e; unsigned char canary[32]; } newer;
	struct v0 small = { .size = sizeof(small), .a = 1, .b = 2 };

	/* Library newer than the caller: its fields, nothing past them. */
	memset(&old, 0xa5, sizeof(old));
	old.s.size = sizeof(old.s);
	gw_abi_copy_out(&old.s, old.s.size, &lib, sizeof(lib));
	TEST_CHECK(old.s.size == sizeof(old.s) && old.s.a == 1 && old.s.b == 2, "older out");
	TEST_CHECK(all(old.canary, sizeof(old.canary), 0xa5), "older out wrote past the caller's size");
	/* Caller newer than the library: what the library lacks is 0, nothing past the size. */
	memset(&newer, 0xa5, sizeof(newer));
	newer.s.size = sizeof(newer.s) + sizeof(newer.e);
	gw_abi_copy_out(&newer.s, newer.s.size, &small, sizeof(small));
	TEST_CHECK(newer.s.size == sizeof(newer.s) + sizeof(newer.e) && newer.s.a == 1 && newer.s.b == 2 &&
		   newer.s.c == 0 && newer.s.d == 0 && newer.e == 0, "newer out: unknown fields not 0");
	TEST_CHECK(all(newer.canary, sizeof(newer.canary), 0xa5), "newer out wrote past the caller's size");
}

static int hook(void *opaque) { (void)opaque; return 0; }
static int pc_hook(void *opaque, bool complete) { (void)opaque; (void)complete; return 0; }
static void later_hook(void) {}

/* An ops table that ends before postcopy_ram: as a VMM built before that hook would have it. */
static void ops_in(void)
{
	struct gw_vm_ops full = { .size = sizeof(full), .pause = hook, .resume = hook,
				  .postcopy_ram = pc_hook };
	struct gw_vm_ops lib;
	struct { struct gw_vm_ops ops; void (*later)(void); } newer = { full, NULL };

	memset(&lib, 0xa5, sizeof(lib));
	TEST_CHECK(gw_abi_copy_in(&lib, sizeof(lib), &full, offsetof(struct gw_vm_ops, postcopy_ram),
				  offsetof(struct gw_vm_ops, postcopy_ram)) == 0 &&
		   lib.pause == hook && !lib.postcopy_ram, "a hook past an older table's size is not NULL");
	TEST_CHECK(gw_vm_ops_copy_in(&lib, &full) == 0 && lib.postcopy_ram, "the table of this version");
	newer.ops.size = sizeof(newer);
	TEST_CHECK(gw_vm_ops_copy_in(&lib, &newer.ops) == 0, "a newer table, hooks it adds NULL");
	newer.later = later_hook;
	TEST_CHECK(gw_vm_ops_copy_in(&lib, &newer.ops) == -E2BIG, "a newer table with a hook set");
	full.size = GW_VM_OPS_SIZE_VER0 - 8;
	TEST_CHECK(gw_vm_ops_copy_in(&lib, &full) == -EINVAL, "a table below version 0");
}

static void vm_info_in(void)
{
	struct gw_ram_block blk = { .name = "ram0" };
	struct gw_vm_info in = { .size = sizeof(in), .nr_blocks = 1, .blocks = &blk, .kvm_vm_fd = -1 }, lib;

	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == 0 && lib.blocks == &blk && lib.nr_blocks == 1, "vm info");
	in.blocks = NULL;
	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == -EINVAL, "blocks NULL");
	in.blocks = &blk;
	in.nr_blocks = GW_MAX_RAM_BLOCKS + 1;
	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == -EINVAL, "too many blocks");
	in.nr_blocks = 1;
	in.cpu_profile_bytes = 16;
	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == -EINVAL, "a CPU profile length without its bytes");
	in.cpu_profile = &blk;
	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == 0 && lib.cpu_profile == &blk, "a CPU profile");
	in.cpu_profile_bytes = GW_CPU_PROFILE_MAX_BYTES + 1;
	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == -EINVAL, "a CPU profile over its bound");
	in.cpu_profile_bytes = 0;
	in.cpu_profile = NULL;
	in.size = GW_VM_INFO_SIZE_VER0;
	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == 0 && !lib.cpu_profile && !lib.cpu_profile_bytes,
		   "version 0: no CPU profile");
	in.size = GW_VM_INFO_SIZE_VER0 - 4;
	TEST_CHECK(gw_vm_info_copy_in(&lib, &in) == -EINVAL, "below version 0");
}

int main(void)
{
	copy_in();
	copy_out();
	ops_in();
	vm_info_in();
	TEST_EXIT();
}
