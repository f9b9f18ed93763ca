/* SPDX-License-Identifier: MIT */
/*
 * Can this host load the state a source saved? A pure function over two
 * descriptions (what the source's vCPUs saw and used, what this host's KVM
 * offers), unit-tested without KVM. The destination calls it first in
 * load_state and refuses with its reason (gw_state_reject) before touching
 * anything, so the source keeps the VM.
 *
 * Refused: another CPU vendor; a CPUID feature bit the guest saw that this
 * host cannot offer (leaves 1, 6, 7.0, 7.1, 0xd.1, 0x80000001, 0x80000007,
 * 0x80000008 feature registers); XSAVE components the guest may use that
 * this host lacks, or a larger XSAVE area than this host saves; a KVM
 * capability the state needs (SREGS2, XSAVE2, XCRS, DEBUGREGS, VCPU_EVENTS,
 * MP_STATE, ADJUST_CLOCK, PIT2); more vCPUs than this host's KVM allows; an
 * MSR the source saved that this host cannot restore.
 */
#ifndef GW_KVM_COMPAT_H
#define GW_KVM_COMPAT_H

#include <stddef.h>
#include <stdint.h>
#include <linux/kvm.h>

/* Capabilities the state may need (fixed numbers: they go on the wire). */
#define KVM_COMPAT_SREGS2 (1u << 0)
#define KVM_COMPAT_XSAVE2 (1u << 1)
#define KVM_COMPAT_XCRS (1u << 2)
#define KVM_COMPAT_DEBUGREGS (1u << 3)
#define KVM_COMPAT_VCPU_EVENTS (1u << 4)
#define KVM_COMPAT_MP_STATE (1u << 5)
#define KVM_COMPAT_ADJUST_CLOCK (1u << 6)
#define KVM_COMPAT_PIT2 (1u << 7)
#define KVM_COMPAT_IRQCHIP (1u << 8)
#define KVM_COMPAT_ALL 0x1ffu

#define KVM_COMPAT_MAX_CPUID 256
#define KVM_COMPAT_MAX_MSRS 512

struct kvm_compat {
	uint32_t caps;			/* KVM_COMPAT_* */
	uint32_t xsave_bytes;		/* XSAVE area size saved (source) / savable (host) */
	uint32_t max_vcpus;		/* host: KVM_CAP_MAX_VCPUS; source: vCPUs in the state */
	uint32_t nr_cpuid;
	struct kvm_cpuid_entry2 cpuid[KVM_COMPAT_MAX_CPUID];	/* source: as set; host: supported */
	uint32_t nr_msrs;
	uint32_t msrs[KVM_COMPAT_MAX_MSRS];	/* source: saved; host: restorable */
};

/* 0 when @host can load state described by @src, else -EOPNOTSUPP and @why. */
int kvm_compat_check(const struct kvm_compat *src, const struct kvm_compat *host,
		     char *why, size_t why_len);

/*
 * The CPU profile a KVM source puts in HELLO (gw_vm_info.cpu_profile), so
 * that a destination refuses a CPU it could not load before round 0: what
 * kvm_compat_check compares but the MSRs (checked at the load). Format,
 * little-endian: le32 version (1), le32 caps, le32 xsave_bytes, le32 count
 * (<= KVM_PROFILE_MAX_LEAVES), count x { le32 function, le32 index, le32
 * eax, ebx, ecx, edx }, each leaf one the check reads, once. No trailing
 * bytes.
 */
#define KVM_PROFILE_VERSION 1
#define KVM_PROFILE_MAX_LEAVES 10
#define KVM_PROFILE_MAX_BYTES (16 + KVM_PROFILE_MAX_LEAVES * 24)
/* The profile of vCPUs given @cpuid, with KVM_COMPAT_* @caps, into @buf (KVM_PROFILE_MAX_BYTES): its length. */
size_t kvm_compat_profile(const struct kvm_cpuid_entry2 *cpuid, uint32_t nr_cpuid, uint32_t caps,
			  uint32_t xsave_bytes, uint8_t *buf);
/*
 * A profile from the wire (hostile) into @out (max_vcpus @nr_vcpus, no
 * MSRs): 0, or -EINVAL with @why.
 */
int kvm_compat_from_profile(const uint8_t *buf, size_t len, uint32_t nr_vcpus, struct kvm_compat *out,
			    char *why, size_t why_len);

/* The entry for (@function, @index), or NULL. */
const struct kvm_cpuid_entry2 *kvm_compat_cpuid_find(const struct kvm_cpuid_entry2 *e, unsigned n,
						     uint32_t function, uint32_t index);

#endif
