/* SPDX-License-Identifier: MIT */
/*
 * The dirty rate the KVM `dirty` guest reaches on this host, in pages per
 * second, measured from the guest's own `written` counters over a fixed
 * interval (no dirty tracking: the raw guest speed), then with each KVM
 * tracker running (its write-protection faults are part of a migration's
 * cost; the tracker is harvested every 50 ms, as short rounds would).
 * Prints one line per configuration. Exits 77 where /dev/kvm is unusable.
 * The rate depends on how busy the host is: on a nested host that emulates
 * guest instructions it is the emulator's speed.
 *
 *   build/bench/kvm_dirty_rate [SECONDS] [VCPUS]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <godwit/godwit.h>
#include "guest_abi.h"
#include "kvm/kvm_vm.h"
#include "mem/dirty.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t written(struct vmm *vm, unsigned nr)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < nr; i++) {
		const struct gw_vcpu_area *a = vmm_kvm_gpa_to_host(vm, GW_GUEST_VCPU_AREA_GPA +
								   i * GW_VCPU_AREA_BYTES, GW_VCPU_AREA_BYTES);
		sum += *(const volatile uint64_t *)&a->written;
	}
	return sum;
}

static int measure(const char *pattern, enum gw_dirty_backend_id track, unsigned secs, unsigned nr)
{
	char spec[96], err[256] = "";
	struct kvm_vm_opts opts = { .guest_recheck = 0,
		.dirty = track == GW_DIRTY_KVM_LOG ? KVM_DIRTY_MODE_LOG : KVM_DIRTY_MODE_RING };
	struct vmm_config cfg = { .memory_bytes = 256 << 20, .nr_vcpus = nr, .fill = VMM_FILL_ZERO };
	struct gw_dirty d = { 0 };
	struct gw_bitmap bm[GW_MAX_RAM_BLOCKS];
	uint64_t w0, t0, w1, t1, collects = 0;
	struct kvm_guest_report rep;
	struct vmm *vm;

	snprintf(spec, sizeof(spec), "dirty:ws=64M,pattern=%s", pattern);
	cfg.workload = spec;
	vm = vmm_kvm_create_opts(&cfg, &opts, err, sizeof(err));
	if (!vm) {
		fprintf(stderr, "kvm_dirty_rate: %s\n", err);
		return 1;
	}
	vmm_kvm.start(vm);
	while (written(vm, nr) < 1000)		/* past boot */
		;
	memset(bm, 0, sizeof(bm));
	if (track != GW_DIRTY_AUTO) {
		const struct gw_vm_info *info = vmm_kvm.info(vm);

		if (gw_dirty_select(&d, info, track) || d.ops->start(&d)) {
			fprintf(stderr, "kvm_dirty_rate: tracker %d unusable\n", track);
			return 1;
		}
		for (unsigned i = 0; i < info->nr_blocks; i++)
			gw_bitmap_init(&bm[i], info->blocks[i].size_bytes / GW_PAGE_BYTES);
	}
	w0 = written(vm, nr);
	t0 = now_ns();
	while (now_ns() - t0 < secs * 1000000000ull) {
		struct timespec ts = { 0, 50000000 };	/* harvest every 50 ms, like short rounds */

		nanosleep(&ts, NULL);
		if (d.ops) {
			const struct gw_vm_info *info = vmm_kvm.info(vm);

			d.ops->collect(&d, bm);
			for (unsigned i = 0; i < info->nr_blocks; i++) {
				if (d.ops->clear)
					d.ops->clear(&d, i, 0, bm[i].nr_bits, bm[i].words);
				gw_bitmap_zero(&bm[i]);
			}
			collects++;
		}
	}
	w1 = written(vm, nr);
	t1 = now_ns();
	if (d.ops)
		d.ops->stop(&d);
	vmm_kvm_guest_report(vm, &rep);
	printf("dirty guest pattern=%-4s vcpus=%u tracking=%-8s pages=%" PRIu64 " seconds=%.2f "
	       "pages_per_s=%.0f harvests=%" PRIu64 " ring_full_exits=%" PRIu64 "\n", pattern, nr,
	       track == GW_DIRTY_AUTO ? "none" : d.ops ? d.ops->name : "?", w1 - w0,
	       (t1 - t0) / 1e9, (w1 - w0) * 1e9 / (double)(t1 - t0), collects,
	       rep.dirty_ring_full_exits);
	vmm_kvm.destroy(vm);
	for (unsigned i = 0; i < GW_MAX_RAM_BLOCKS; i++)
		gw_bitmap_free(&bm[i]);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned secs = argc > 1 ? (unsigned)atoi(argv[1]) : 5;
	unsigned nr = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
	char why[256] = "";
	int ret = 0;

	gw_log_set_level(GW_LOG_WARN);
	if (vmm_kvm.probe(why, sizeof(why))) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	ret |= measure("page", GW_DIRTY_AUTO, secs, nr);
	ret |= measure("byte", GW_DIRTY_AUTO, secs, nr);
	ret |= measure("page", GW_DIRTY_KVM_RING, secs, nr);
	ret |= measure("page", GW_DIRTY_KVM_LOG, secs, nr);
	ret |= measure("byte", GW_DIRTY_KVM_RING, secs, nr);
	ret |= measure("byte", GW_DIRTY_KVM_LOG, secs, nr);
	return ret;
}
