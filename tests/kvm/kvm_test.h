/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the KVM tests (suite 'kvm'), KVM selftests style: each test
 * calls kvm_test_require() first, which skips (exit 77, "SKIP: ...") where
 * /dev/kvm is missing or unusable. Waits are bounded (a hang fails with the
 * last log lines), never pass criteria.
 */
#ifndef GW_KVM_TEST_H
#define GW_KVM_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include "guest_abi.h"
#include "kvm/kvm_vm.h"

/* Skip (77) unless the KVM backend probes; quiet the log unless GW_TEST_VERBOSE. */
void kvm_test_require(void);
/* Fail after @seconds, printing the last log lines. */
void kvm_test_time_bound(unsigned seconds);
/* Lines logged so far that contain @needle. */
unsigned kvm_test_log_count(const char *needle);

/* A VM of the KVM backend; TEST_ASSERTs on failure. */
struct vmm *kvm_test_vm(uint64_t memory_bytes, unsigned nr_vcpus, const char *workload,
			enum vmm_fill fill, const struct kvm_vm_opts *opts);
/* vCPU @i's area in guest memory. */
struct gw_vcpu_area *kvm_test_area(struct vmm *vm, unsigned i);
/* Poll until vmm_kvm.progress(vm) >= @target (bounded by kvm_test_time_bound). */
void kvm_test_wait_progress(struct vmm *vm, uint64_t target);
/* Copy guest RAM (every block) from @src to @dst, which has the same layout. */
void kvm_test_copy_ram(struct vmm *src, struct vmm *dst);

uint64_t kvm_test_now_ns(void);
void kvm_test_sleep_ms(unsigned ms);

#endif
