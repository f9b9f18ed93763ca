/* SPDX-License-Identifier: MIT */
/* Can this host load the source's vCPU state? (kvm_compat.h) */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <godwit/buf.h>
#include "kvm/kvm_compat.h"

enum reg { EAX, EBX, ECX, EDX };

/* Feature registers: every bit set for the guest must be offerable here. */
static const struct feature_reg {
	uint32_t function, index;
	enum reg reg;
	uint32_t ignore;		/* bits that are not features (dynamic, per-vCPU) */
	const char *name;
} feature_regs[] = {
	{ 0x1, 0, ECX, 1u << 27, "CPUID.1:ECX" },	/* OSXSAVE mirrors CR4 */
	{ 0x1, 0, EDX, 0, "CPUID.1:EDX" },
	{ 0x6, 0, EAX, 0, "CPUID.6:EAX" },
	{ 0x7, 0, EBX, 0, "CPUID.7.0:EBX" },
	{ 0x7, 0, ECX, 1u << 4, "CPUID.7.0:ECX" },	/* OSPKE mirrors CR4 */
	{ 0x7, 0, EDX, 0, "CPUID.7.0:EDX" },
	{ 0x7, 1, EAX, 0, "CPUID.7.1:EAX" },
	{ 0xd, 1, EAX, 0, "CPUID.0xd.1:EAX" },
	{ 0x80000001, 0, ECX, 0, "CPUID.0x80000001:ECX" },
	{ 0x80000001, 0, EDX, 0, "CPUID.0x80000001:EDX" },
	{ 0x80000007, 0, EDX, 0, "CPUID.0x80000007:EDX" },
	{ 0x80000008, 0, EBX, 0, "CPUID.0x80000008:EBX" },
};

static const struct cap_name {
	uint32_t bit;
	const char *name;
} cap_names[] = {
	{ KVM_COMPAT_SREGS2, "KVM_CAP_SREGS2" },
	{ KVM_COMPAT_XSAVE2, "KVM_CAP_XSAVE2" },
	{ KVM_COMPAT_XCRS, "KVM_CAP_XCRS" },
	{ KVM_COMPAT_DEBUGREGS, "KVM_CAP_DEBUGREGS" },
	{ KVM_COMPAT_VCPU_EVENTS, "KVM_CAP_VCPU_EVENTS" },
	{ KVM_COMPAT_MP_STATE, "KVM_CAP_MP_STATE" },
	{ KVM_COMPAT_ADJUST_CLOCK, "KVM_CAP_ADJUST_CLOCK" },
	{ KVM_COMPAT_PIT2, "KVM_CAP_PIT2" },
	{ KVM_COMPAT_IRQCHIP, "KVM_CAP_IRQCHIP" },
};

__attribute__((format(printf, 3, 4)))
static int refuse(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return -EOPNOTSUPP;
}

const struct kvm_cpuid_entry2 *kvm_compat_cpuid_find(const struct kvm_cpuid_entry2 *e, unsigned n,
						     uint32_t function, uint32_t index)
{
	for (unsigned i = 0; i < n; i++)
		if (e[i].function == function &&
		    (e[i].index == index || !(e[i].flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX)))
			return &e[i];
	return NULL;
}

static uint32_t reg_of(const struct kvm_cpuid_entry2 *e, enum reg r)
{
	if (!e)
		return 0;
	switch (r) {
	case EAX: return e->eax;
	case EBX: return e->ebx;
	case ECX: return e->ecx;
	default: return e->edx;
	}
}

static void vendor_of(const struct kvm_compat *c, char out[13])
{
	const struct kvm_cpuid_entry2 *e = kvm_compat_cpuid_find(c->cpuid, c->nr_cpuid, 0, 0);
	uint32_t r[3] = { reg_of(e, EBX), reg_of(e, EDX), reg_of(e, ECX) };

	for (unsigned i = 0; i < 12; i++)
		out[i] = (char)(r[i / 4] >> (8 * (i % 4)));
	out[12] = '\0';
}

static int check_cpuid(const struct kvm_compat *src, const struct kvm_compat *host,
		       char *why, size_t why_len)
{
	char sv[13], hv[13];
	const struct kvm_cpuid_entry2 *se, *he;
	uint64_t sx, hx;

	vendor_of(src, sv);
	vendor_of(host, hv);
	if (memcmp(sv, hv, 12))
		return refuse(why, why_len, "CPU vendor differs: source \"%s\", this host \"%s\"", sv, hv);
	for (size_t i = 0; i < sizeof(feature_regs) / sizeof(feature_regs[0]); i++) {
		const struct feature_reg *f = &feature_regs[i];
		uint32_t missing;

		se = kvm_compat_cpuid_find(src->cpuid, src->nr_cpuid, f->function, f->index);
		he = kvm_compat_cpuid_find(host->cpuid, host->nr_cpuid, f->function, f->index);
		missing = reg_of(se, f->reg) & ~reg_of(he, f->reg) & ~f->ignore;
		if (missing)
			return refuse(why, why_len, "%s: the guest saw features %#x this host cannot offer",
				      f->name, missing);
	}
	/* XSAVE components the guest may enable (XCR0 bits, CPUID.0xd.0 EDX:EAX). */
	se = kvm_compat_cpuid_find(src->cpuid, src->nr_cpuid, 0xd, 0);
	he = kvm_compat_cpuid_find(host->cpuid, host->nr_cpuid, 0xd, 0);
	sx = (uint64_t)reg_of(se, EDX) << 32 | reg_of(se, EAX);
	hx = (uint64_t)reg_of(he, EDX) << 32 | reg_of(he, EAX);
	if (sx & ~hx)
		return refuse(why, why_len, "XSAVE components %#llx of the guest are not supported here",
			      (unsigned long long)(sx & ~hx));
	return 0;
}

static int check_msrs(const struct kvm_compat *src, const struct kvm_compat *host,
		      char *why, size_t why_len)
{
	for (uint32_t i = 0; i < src->nr_msrs; i++) {
		uint32_t j;

		for (j = 0; j < host->nr_msrs; j++)
			if (host->msrs[j] == src->msrs[i])
				break;
		if (j == host->nr_msrs)
			return refuse(why, why_len, "MSR %#x was saved by the source but cannot be restored here",
				      src->msrs[i]);
	}
	return 0;
}

int kvm_compat_check(const struct kvm_compat *src, const struct kvm_compat *host,
		     char *why, size_t why_len)
{
	uint32_t missing = src->caps & ~host->caps;
	int ret;

	if (src->caps & ~KVM_COMPAT_ALL)
		return refuse(why, why_len, "unknown capability bits %#x in the state",
			      src->caps & ~KVM_COMPAT_ALL);
	for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++)
		if (missing & cap_names[i].bit)
			return refuse(why, why_len, "the state needs %s, which this host's KVM lacks",
				      cap_names[i].name);
	if (src->xsave_bytes > host->xsave_bytes)
		return refuse(why, why_len, "XSAVE area of %u bytes, this host saves at most %u",
			      src->xsave_bytes, host->xsave_bytes);
	if (src->max_vcpus > host->max_vcpus)
		return refuse(why, why_len, "%u vCPUs, this host's KVM allows %u",
			      src->max_vcpus, host->max_vcpus);
	ret = check_cpuid(src, host, why, why_len);
	if (ret)
		return ret;
	return check_msrs(src, host, why, why_len);
}

/* The leaves check_cpuid reads: the vendor, feature_regs[], the XSAVE components. */
static const struct { uint32_t function, index; } profile_leaves[KVM_PROFILE_MAX_LEAVES] = {
	{ 0x0, 0 }, { 0x1, 0 }, { 0x6, 0 }, { 0x7, 0 }, { 0x7, 1 }, { 0xd, 0 }, { 0xd, 1 },
	{ 0x80000001, 0 }, { 0x80000007, 0 }, { 0x80000008, 0 },
};

size_t kvm_compat_profile(const struct kvm_cpuid_entry2 *cpuid, uint32_t nr_cpuid, uint32_t caps,
			  uint32_t xsave_bytes, uint8_t *buf)
{
	struct gw_wbuf w;
	size_t count_at;
	uint32_t n = 0;

	gw_wbuf_init(&w, buf, KVM_PROFILE_MAX_BYTES);
	gw_put_le32(&w, KVM_PROFILE_VERSION);
	gw_put_le32(&w, caps);
	gw_put_le32(&w, xsave_bytes);
	count_at = gw_put_le32_later(&w);
	for (unsigned i = 0; i < KVM_PROFILE_MAX_LEAVES; i++) {
		const struct kvm_cpuid_entry2 *e = kvm_compat_cpuid_find(cpuid, nr_cpuid, profile_leaves[i].function,
									  profile_leaves[i].index);

		if (!e)
			continue;
		gw_put_le32(&w, profile_leaves[i].function);
		gw_put_le32(&w, profile_leaves[i].index);
		gw_put_le32(&w, e->eax);
		gw_put_le32(&w, e->ebx);
		gw_put_le32(&w, e->ecx);
		gw_put_le32(&w, e->edx);
		n++;
	}
	gw_patch_le32(&w, count_at, n);
	return w.len;
}

/* Which of profile_leaves (function, index) is, or -1. */
static int profile_leaf(uint32_t function, uint32_t index)
{
	for (unsigned i = 0; i < KVM_PROFILE_MAX_LEAVES; i++)
		if (profile_leaves[i].function == function && profile_leaves[i].index == index)
			return (int)i;
	return -1;
}

int kvm_compat_from_profile(const uint8_t *buf, size_t len, uint32_t nr_vcpus, struct kvm_compat *out,
			    char *why, size_t why_len)
{
	struct gw_rbuf r;
	uint32_t version, n, seen = 0;

	memset(out, 0, sizeof(*out));
	gw_rbuf_init(&r, buf, len);
	version = gw_get_le32(&r);
	out->caps = gw_get_le32(&r);
	out->xsave_bytes = gw_get_le32(&r);
	n = gw_get_le32(&r);
	if (gw_rbuf_err(&r) || version != KVM_PROFILE_VERSION || n > KVM_PROFILE_MAX_LEAVES) {
		refuse(why, why_len, "the source's CPU profile (version %u, %u leaves) is not one this "
		       "destination reads", version, n);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct kvm_cpuid_entry2 *e = &out->cpuid[i];
		int leaf;

		e->function = gw_get_le32(&r);
		e->index = gw_get_le32(&r);
		e->eax = gw_get_le32(&r);
		e->ebx = gw_get_le32(&r);
		e->ecx = gw_get_le32(&r);
		e->edx = gw_get_le32(&r);
		e->flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;	/* find matches (function, index) exactly */
		leaf = profile_leaf(e->function, e->index);
		if (gw_rbuf_err(&r) || leaf < 0 || (seen & (1u << leaf))) {
			refuse(why, why_len, "the source's CPU profile is malformed (leaf %u)", i);
			return -EINVAL;
		}
		seen |= 1u << leaf;
	}
	if (gw_rbuf_done(&r)) {
		refuse(why, why_len, "the source's CPU profile has trailing bytes");
		return -EINVAL;
	}
	out->nr_cpuid = n;
	out->max_vcpus = nr_vcpus;
	return 0;
}
