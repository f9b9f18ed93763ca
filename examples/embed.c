/* SPDX-License-Identifier: MIT */
/*
 * The smallest VMM that embeds libgodwit: 16 MiB of "guest RAM" in a
 * memfd, no vCPUs, one state section, migrated to a second session in the
 * same process over a UNIX socket. Build it against an installed godwit:
 *
 *   cc -o embed embed.c $(pkg-config --cflags --libs godwit)
 *
 * Exit status: 0 migrated and the copy is equal, 77 this host cannot
 * track dirty pages (userfaultfd write-protect), 1 otherwise.
 *
 * Every struct handed to the library or filled by it begins with its size
 * (sizeof, as this program was built): that is what lets the program run
 * against a later libgodwit whose structs have grown (libgodwit(3), ABI).
 */
#define _GNU_SOURCE		/* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <godwit/godwit.h>

#define RAM_BYTES (16u << 20)

struct vm {
	struct gw_ram_block block;	/* the RAM block gw_vm_info points at */
	void *ram;
	uint64_t counter;		/* the "device state" */
};

static int vm_pause(void *opaque) { (void)opaque; return 0; }	/* no vCPUs to stop */
static int vm_resume(void *opaque) { (void)opaque; return 0; }

static int vm_save(void *opaque, struct gw_state *st)
{
	struct vm *vm = opaque;
	uint8_t le[8];

	gw_le64_put(le, vm->counter);	/* sections are portable bytes, never a C struct */
	return gw_state_add(st, "counter", 1, le, sizeof(le));
}

static int vm_load(void *opaque, struct gw_state *st)
{
	struct vm *vm = opaque;
	uint32_t version;
	size_t len;
	const uint8_t *p = gw_state_find(st, "counter", &version, &len);

	if (!p || version != 1 || len != 8)
		return gw_state_reject(st, -EINVAL, "no counter section of version 1");
	vm->counter = gw_le64_get(p);
	return 0;
}

/*
 * The engine's log lines, one per call, without the newline. By default the
 * library writes warnings and errors to stderr; a VMM hands them to its own
 * log instead. gw_log_set_level(GW_LOG_INFO) would add a line per phase and
 * per round (docs/log-events.md).
 */
static void log_sink(void *opaque, enum gw_log_level level, const char *line)
{
	(void)opaque;
	fprintf(stderr, "embed: godwit %s: %s\n", level == GW_LOG_ERROR ? "error" : "warning", line);
}

static const struct gw_vm_ops ops = {
	.size = sizeof(struct gw_vm_ops),
	.pause = vm_pause, .resume = vm_resume, .save_state = vm_save, .load_state = vm_load,
};

/* One RAM block: a fresh memfd of RAM_BYTES (reads as zeros, as a destination's must). */
static int vm_init(struct vm *vm, struct gw_vm_info *info, const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, RAM_BYTES))
		return -1;
	vm->ram = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (vm->ram == MAP_FAILED)
		return -1;
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	info->nr_blocks = 1;
	info->blocks = &vm->block;
	info->kvm_vm_fd = -1;
	info->kvm_dirty_ring_full_efd = -1;
	snprintf(vm->block.name, sizeof(vm->block.name), "ram0");
	vm->block.host = vm->ram;
	vm->block.size_bytes = RAM_BYTES;
	vm->block.page_size_bytes = GW_PAGE_BYTES;
	vm->block.fd = fd;
	return 0;
}

int main(void)
{
	struct vm src = { .counter = 42 }, dst = { 0 };
	struct gw_vm_info src_info, dst_info;
	struct gw_stats st = { .size = sizeof(st) };
	struct gw_round_stats round = { .size = sizeof(round) };
	struct gw_session *in, *out;
	char url[64], why[256];
	int ret;

	printf("libgodwit %s\n", gw_version());
	gw_log_set_sink(log_sink, NULL);	/* the level stays the default: warnings and errors */
	if (gw_dirty_probe(GW_DIRTY_AUTO, NULL, why, sizeof(why))) {
		printf("skipped: no dirty tracking here: %s\n", why);
		return 77;
	}
	if (vm_init(&src, &src_info, "src") || vm_init(&dst, &dst_info, "dst")) {
		perror("guest RAM");
		return 1;
	}
	for (size_t i = 0; i < RAM_BYTES; i += GW_PAGE_BYTES)
		memset((char *)src.ram + i, (int)(i / GW_PAGE_BYTES % 251), 100);

	snprintf(url, sizeof(url), "unix:/tmp/godwit-embed-%d.sock", (int)getpid());
	in = gw_session_new(GW_ROLE_DEST, &dst_info, &ops, &dst);
	out = gw_session_new(GW_ROLE_SOURCE, &src_info, &ops, &src);
	if (!in || !out || gw_incoming_start(in, url)) {
		fprintf(stderr, "cannot set the sessions up\n");
		return 1;
	}
	gw_session_set(out, GW_PARAM_DOWNTIME_LIMIT_US, 50000);
	ret = gw_migrate_start(out, url);
	if (!ret)
		ret = gw_session_wait(out);
	if (!ret)
		ret = gw_session_wait(in);
	if (ret) {
		fprintf(stderr, "migration failed: %s\n", gw_session_error(out, why, sizeof(why)));
		return 1;
	}
	ret = memcmp(src.ram, dst.ram, RAM_BYTES) || dst.counter != 42;
	printf("migrated %u MiB: %s, counter %llu\n", RAM_BYTES >> 20, ret ? "DIFFERENT" : "equal",
	       (unsigned long long)dst.counter);
	/* The figures: the scalars in one call, the per-round table a row at a time. */
	if (gw_session_stats(out, &st) == 0) {
		printf("%u rounds, %llu bytes sent, downtime %.3f ms\n", st.rounds,
		       (unsigned long long)st.transferred_bytes, st.downtime_ns / 1e6);
		for (unsigned i = 0; gw_session_round(out, i, &round) == 0; i++)
			printf("  round %u: %llu pages, %.3f ms\n", round.round,
			       (unsigned long long)round.normal_pages, round.duration_ns / 1e6);
	}
	gw_session_free(out);
	gw_session_free(in);
	return ret;
}
