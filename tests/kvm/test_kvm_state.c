/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the complete state of a KVM VM survives save and load. A guest
 * computing across pause, save, load into a fresh VM (RAM copied) and resume
 * ends with the result of a VM never paused and of the host's reference
 * (general registers, memory, and XSAVE state: part of the computation
 * lives only in %xmm8/%xmm9). The idle guest's LAPIC timers tick again on
 * every vCPU after load (LAPIC, x2APIC mode, IDT in memory). A destination
 * refuses state it cannot load (another CPU vendor, a CPUID feature this
 * host lacks, a missing section, a corrupt vCPU record) with a reason,
 * before it creates anything: the same VM then loads the genuine state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/godwit.h>
#include "compute_algo.h"
#include "kvm/kvm_state_codec.h"
#include "kvm_test.h"
#include "util/state.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (4u << 20)
#define SEED 7u				/* kvm_test_vm's seed */

static struct gw_state *state_new(void)
{
	struct gw_state *st = calloc(1, sizeof(*st));

	TEST_ASSERT(st, "calloc");
	gw_state_init(st);
	return st;
}

static void state_free(struct gw_state *st)
{
	gw_state_release(st);
	free(st);
}

/* A copy of @src without @skip, with section @name replaced by @data when given. */
static struct gw_state *state_copy(const struct gw_state *src, const char *skip, const char *name,
				   const void *data, size_t len)
{
	struct gw_state *st = state_new();

	for (unsigned i = 0; i < src->nr_sections; i++) {
		const struct gw_section *s = &src->sections[i];

		if (skip && !strcmp(s->name, skip))
			continue;
		if (name && !strcmp(s->name, name))
			TEST_ASSERT(gw_state_add(st, s->name, s->version, data, len) == 0, "add");
		else
			TEST_ASSERT(gw_state_add(st, s->name, s->version, s->data, s->len_bytes) == 0, "add");
	}
	return st;
}

static struct gw_state *pause_and_save(struct vmm *vm)
{
	struct gw_state *st = state_new();

	TEST_ASSERT(vmm_kvm.engine_ops->pause(vm) == 0, "pause");
	TEST_ASSERT(vmm_kvm.engine_ops->save_state(vm, st) == 0, "save_state");
	return st;
}

static uint64_t wait_done(struct vmm *vm)
{
	struct kvm_guest_report rep;

	for (;;) {
		vmm_kvm_guest_report(vm, &rep);
		if (rep.done || rep.panics)
			break;
		kvm_test_sleep_ms(10);
	}
	TEST_ASSERT(!rep.panics, "guest exception or vCPU failure");
	return rep.result;
}

/* A fresh destination for @src's layout, RAM copied, ready for load_state. */
static struct vmm *destination_for(struct vmm *src, const struct kvm_vm_opts *opts)
{
	struct vmm_config cfg = { .memory_bytes = RAM_BYTES, .nr_vcpus = 1, .incoming = true };
	char err[256] = "";
	struct vmm *dst = vmm_kvm_create_opts(&cfg, opts, err, sizeof(err));

	TEST_ASSERT(dst, "destination: %s", err);
	kvm_test_copy_ram(src, dst);
	return dst;
}

/* The saved state has every part: MSRs with the TSC, every vCPU record. */
static void check_sections(const struct gw_state *st)
{
	struct kvm_vm_state *vs = calloc(1, sizeof(*vs));
	struct kvm_vcpu_state *cs = calloc(1, sizeof(*cs));
	const void *p;
	size_t len;
	char why[200] = "";
	bool tsc = false;

	TEST_ASSERT(vs && cs, "calloc");
	p = gw_state_find(st, KVM_SEC_VM, NULL, &len);
	TEST_ASSERT(p && kvm_dec_vm(p, len, vs, why, sizeof(why)) == 0, "kvm-vm: %s", why);
	for (uint32_t i = 0; i < vs->compat.nr_msrs; i++)
		tsc |= vs->compat.msrs[i] == 0x10;	/* MSR_IA32_TSC */
	TEST_CHECK(tsc && vs->compat.nr_msrs > 10, "%u MSRs saved, TSC %s", vs->compat.nr_msrs,
		   tsc ? "included" : "missing");
	TEST_CHECK(vs->has_pit && vs->compat.nr_cpuid > 10, "kvm-vm: pit %d, %u CPUID entries",
		   vs->has_pit, vs->compat.nr_cpuid);
	p = gw_state_find(st, "kvm-vcpu1", NULL, &len);
	TEST_ASSERT(p && kvm_dec_vcpu(p, len, vs->compat.caps, cs, why, sizeof(why)) == 0,
		    "kvm-vcpu1: %s", why);
	TEST_CHECK(cs->index == 1 && cs->nr_msrs == vs->compat.nr_msrs && cs->xsave_bytes >= 4096 &&
		   cs->has_xcrs && cs->has_events && cs->has_debugregs,
		   "kvm-vcpu1: %u MSRs, XSAVE %u bytes, xcrs %d events %d debugregs %d", cs->nr_msrs,
		   cs->xsave_bytes, cs->has_xcrs, cs->has_events, cs->has_debugregs);
	free(cs->xsave);
	free(cs);
	free(vs);
}

static void test_compute_round_trip(uint64_t iters)
{
	struct kvm_vm_opts opts = { .guest = "compute", .compute_iters = iters, .guest_recheck = 0 };
	uint64_t want = compute_reference(SEED, iters), never_paused, migrated;
	struct vmm *ref = kvm_test_vm(RAM_BYTES, 2, "idle", VMM_FILL_NONE, &opts);
	struct vmm *src = kvm_test_vm(RAM_BYTES, 2, "idle", VMM_FILL_NONE, &opts);
	struct vmm *dst;
	struct gw_state *st;

	TEST_ASSERT(vmm_kvm.start(ref) == 0 && vmm_kvm.start(src) == 0, "start");
	kvm_test_wait_progress(src, iters / 4);
	st = pause_and_save(src);
	TEST_CHECK(vmm_kvm.progress(src) < iters, "the computation ended before the pause");
	TEST_CHECK(gw_state_count(st) == 7, "%u sections, expected 7 (vm, workload, clock, irqchip, "
		   "pit, 2 vCPUs)", gw_state_count(st));
	check_sections(st);
	dst = destination_for(src, &opts);
	TEST_ASSERT(vmm_kvm.engine_ops->load_state(dst, st) == 0, "load_state: %s", st->reject_reason);
	TEST_ASSERT(vmm_kvm.engine_ops->resume(dst) == 0, "resume");
	migrated = wait_done(dst);
	never_paused = wait_done(ref);
	TEST_CHECK(never_paused == want, "never paused: %#llx, host reference %#llx",
		   (unsigned long long)never_paused, (unsigned long long)want);
	TEST_CHECK(migrated == want, "saved and loaded: %#llx, host reference %#llx",
		   (unsigned long long)migrated, (unsigned long long)want);
	state_free(st);
	vmm_kvm.destroy(ref);
	vmm_kvm.destroy(src);
	vmm_kvm.destroy(dst);
}

/* Load @st into @dst: refused, with @needle in the reason, and nothing created. */
static void expect_refused(struct vmm *dst, struct gw_state *st, const char *needle)
{
	int ret = vmm_kvm.engine_ops->load_state(dst, st);

	TEST_CHECK(ret < 0, "state with %s accepted", needle);
	TEST_CHECK(strstr(st->reject_reason, needle), "reason \"%s\" lacks \"%s\"",
		   st->reject_reason, needle);
	TEST_CHECK(vmm_kvm.state(dst) == VMM_INCOMING, "destination left incoming");
	TEST_CHECK(vmm_kvm.info(dst)->nr_vcpus == 0, "destination created vCPUs before refusing");
}

/* kvm-vm with CPUID changed by @mutate; the re-encoded section. */
static void *vm_section_with(const struct gw_state *st, void (*mutate)(struct kvm_vm_state *),
			     size_t *len)
{
	struct kvm_vm_state *vs = calloc(1, sizeof(*vs));
	size_t n;
	const void *p = gw_state_find(st, KVM_SEC_VM, NULL, &n);
	char why[200];
	void *buf;

	TEST_ASSERT(vs && p && kvm_dec_vm(p, n, vs, why, sizeof(why)) == 0, "kvm-vm: %s", why);
	mutate(vs);
	buf = KVM_ENCODE_ALLOC(kvm_enc_vm, vs, len);
	free(vs);
	TEST_ASSERT(buf, "encode");
	return buf;
}

static struct kvm_cpuid_entry2 *entry(struct kvm_vm_state *vs, uint32_t fn, uint32_t idx)
{
	for (uint32_t i = 0; i < vs->compat.nr_cpuid; i++)
		if (vs->compat.cpuid[i].function == fn && vs->compat.cpuid[i].index == idx)
			return &vs->compat.cpuid[i];
	TEST_ASSERT(0, "CPUID %#x.%u not in the state", fn, idx);
	return NULL;
}

static void other_vendor(struct kvm_vm_state *vs)
{
	entry(vs, 0, 0)->ebx ^= 0x20202020;	/* "AuthenticAMD" -> "aUTH..." */
}

static void extra_feature(struct kvm_vm_state *vs)
{
	struct kvm_cpuid_entry2 *e = entry(vs, 7, 0);

	for (unsigned b = 0; b < 32; b++)
		if (!(e->ebx & (1u << b))) {
			e->ebx |= 1u << b;	/* this host's KVM does not offer it */
			return;
		}
}

static void test_refusals(uint64_t iters)
{
	struct kvm_vm_opts opts = { .guest = "compute", .compute_iters = iters, .guest_recheck = 0 };
	struct vmm *src = kvm_test_vm(RAM_BYTES, 1, "idle", VMM_FILL_NONE, &opts);
	struct vmm *dst;
	struct gw_state *st, *bad;
	uint8_t *vcpu;
	size_t len;
	void *sec;

	TEST_ASSERT(vmm_kvm.start(src) == 0, "start");
	kvm_test_wait_progress(src, iters / 8);
	st = pause_and_save(src);
	dst = destination_for(src, &opts);

	bad = state_copy(st, KVM_SEC_CLOCK, NULL, NULL, 0);
	expect_refused(dst, bad, "kvm-clock missing");
	state_free(bad);

	sec = vm_section_with(st, other_vendor, &len);
	bad = state_copy(st, NULL, KVM_SEC_VM, sec, len);
	expect_refused(dst, bad, "vendor");
	state_free(bad);
	free(sec);

	sec = vm_section_with(st, extra_feature, &len);
	bad = state_copy(st, NULL, KVM_SEC_VM, sec, len);
	expect_refused(dst, bad, "CPUID.7.0:EBX");
	state_free(bad);
	free(sec);

	vcpu = malloc(64 << 10);
	TEST_ASSERT(vcpu, "malloc");
	memcpy(vcpu, gw_state_find(st, "kvm-vcpu0", NULL, &len), len);
	vcpu[8] = 99;			/* the first record's tag */
	bad = state_copy(st, NULL, "kvm-vcpu0", vcpu, len);
	expect_refused(dst, bad, "unknown");
	state_free(bad);
	free(vcpu);

	/* Nothing was touched: the genuine state loads and the result is right. */
	TEST_ASSERT(vmm_kvm.engine_ops->load_state(dst, st) == 0, "load_state: %s", st->reject_reason);
	TEST_ASSERT(vmm_kvm.engine_ops->resume(dst) == 0, "resume");
	TEST_CHECK(wait_done(dst) == compute_reference(SEED, iters), "result after refusals");
	state_free(st);
	vmm_kvm.destroy(src);
	vmm_kvm.destroy(dst);
}

/* The idle guest's LAPIC timers run again after load, on every vCPU. */
static void test_timer_after_load(void)
{
	struct kvm_vm_opts opts = { .tick_ns = 1000000, .guest_recheck = 0 };
	struct vmm *src = kvm_test_vm(RAM_BYTES, 2, "idle", VMM_FILL_NONE, &opts);
	struct vmm_config cfg = { .memory_bytes = RAM_BYTES, .nr_vcpus = 1, .incoming = true };
	uint64_t saved[2];
	char err[256] = "";
	struct vmm *dst;
	struct gw_state *st;

	TEST_ASSERT(vmm_kvm.start(src) == 0, "start");
	for (unsigned i = 0; i < 2; i++)
		while (*(volatile uint64_t *)&kvm_test_area(src, i)->ticks < 10)
			kvm_test_sleep_ms(5);
	st = pause_and_save(src);
	dst = vmm_kvm_create_opts(&cfg, &opts, err, sizeof(err));
	TEST_ASSERT(dst, "destination: %s", err);
	kvm_test_copy_ram(src, dst);
	for (unsigned i = 0; i < 2; i++)
		saved[i] = kvm_test_area(dst, i)->ticks;
	TEST_ASSERT(vmm_kvm.engine_ops->load_state(dst, st) == 0, "load_state: %s", st->reject_reason);
	TEST_ASSERT(vmm_kvm.engine_ops->resume(dst) == 0, "resume");
	for (unsigned i = 0; i < 2; i++)
		while (*(volatile uint64_t *)&kvm_test_area(dst, i)->ticks < saved[i] + 20)
			kvm_test_sleep_ms(5);
	state_free(st);
	vmm_kvm.destroy(src);
	vmm_kvm.destroy(dst);
}

int main(void)
{
	kvm_test_require();
	kvm_test_time_bound(280);
	test_compute_round_trip(200000);
	test_refusals(100000);
	test_timer_after_load();
	TEST_EXIT();
}
