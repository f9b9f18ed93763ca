/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the destination's compatibility check accepts state from an
 * identical host and from a host offering less than this one, and refuses,
 * naming the cause, state whose guest saw another CPU vendor, any CPUID
 * feature bit this host cannot offer (in every feature register checked),
 * XSAVE components or an XSAVE area this host lacks, a KVM capability this
 * host lacks (each one), more vCPUs than KVM allows here, an MSR it cannot
 * restore, unknown capability bits. Bits that mirror control registers
 * (OSXSAVE, OSPKE) are not features. A pure function: no KVM needed.
 * The CPU profile a source sends in HELLO carries what the check compares
 * but the MSRs: decoded, it gives the same verdicts (the MSRs wait for the
 * load), and a malformed profile (any truncation, version, count, unknown or
 * repeated leaf, trailing bytes) is refused with -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvm/kvm_compat.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static void add(struct kvm_compat *c, uint32_t fn, uint32_t idx, uint32_t a, uint32_t b,
		uint32_t cx, uint32_t d)
{
	struct kvm_cpuid_entry2 *e = &c->cpuid[c->nr_cpuid++];

	memset(e, 0, sizeof(*e));
	e->function = fn;
	e->index = idx;
	e->flags = (fn == 7 || fn == 0xd) ? KVM_CPUID_FLAG_SIGNIFCANT_INDEX : 0;
	e->eax = a;
	e->ebx = b;
	e->ecx = cx;
	e->edx = d;
}

/* A plausible AMD host. */
static void host(struct kvm_compat *c)
{
	memset(c, 0, sizeof(*c));
	c->caps = KVM_COMPAT_ALL;
	c->xsave_bytes = 4096;
	c->max_vcpus = 64;
	add(c, 0, 0, 0x10, 0x68747541, 0x444d4163, 0x69746e65);	/* AuthenticAMD */
	add(c, 1, 0, 0x00a00f11, 0x00000800, 0xf6d83203, 0x178bfbff);
	add(c, 6, 0, 0x4, 0, 0, 0);
	add(c, 7, 0, 0, 0x219c07a9, 0x0040069c, 0x10);
	add(c, 7, 1, 0, 0, 0, 0);
	add(c, 0xd, 0, 0x7, 0, 0x340, 0);
	add(c, 0xd, 1, 0xf, 0, 0, 0);
	add(c, 0x80000001, 0, 0x00a00f11, 0, 0x75c237ff, 0x2fd3fbff);
	add(c, 0x80000007, 0, 0, 0, 0, 0x100);
	add(c, 0x80000008, 0, 0x3030, 0x0300d205, 0, 0);
	c->nr_msrs = 3;
	c->msrs[0] = 0x10;		/* TSC */
	c->msrs[1] = 0xc0000080;	/* EFER */
	c->msrs[2] = 0x4b564d00;
}

static struct kvm_cpuid_entry2 *entry(struct kvm_compat *c, uint32_t fn, uint32_t idx)
{
	struct kvm_cpuid_entry2 *e = (struct kvm_cpuid_entry2 *)kvm_compat_cpuid_find(c->cpuid,
										  c->nr_cpuid, fn, idx);

	TEST_ASSERT(e, "no %#x.%u", fn, idx);
	return e;
}

static void refused(const struct kvm_compat *src, const struct kvm_compat *dst, const char *needle)
{
	char why[256] = "";

	TEST_CHECK(kvm_compat_check(src, dst, why, sizeof(why)) == -EOPNOTSUPP, "accepted: %s", needle);
	TEST_CHECK(strstr(why, needle), "reason \"%s\" does not name \"%s\"", why, needle);
}

static void accepted(const struct kvm_compat *src, const struct kvm_compat *dst, const char *what)
{
	char why[256] = "";

	TEST_CHECK(kvm_compat_check(src, dst, why, sizeof(why)) == 0, "%s refused: %s", what, why);
}

/* @src as a HELLO profile, decoded: the verdict against @dst is @want (0 or -EOPNOTSUPP). */
static void profile_verdict(const struct kvm_compat *src, const struct kvm_compat *dst, int want,
			    const char *what)
{
	static struct kvm_compat got;
	uint8_t buf[KVM_PROFILE_MAX_BYTES];
	size_t len = kvm_compat_profile(src->cpuid, src->nr_cpuid, src->caps, src->xsave_bytes, buf);
	char why[256] = "";

	TEST_CHECK(len <= sizeof(buf), "%s: profile of %zu bytes", what, len);
	TEST_CHECK(kvm_compat_from_profile(buf, len, src->max_vcpus, &got, why, sizeof(why)) == 0,
		   "%s: profile refused: %s", what, why);
	TEST_CHECK(kvm_compat_check(&got, dst, why, sizeof(why)) == want, "%s: profile verdict (%s)", what, why);
}

static void profile_hostile(void)
{
	static struct kvm_compat c, got;
	uint8_t buf[KVM_PROFILE_MAX_BYTES + 4];
	size_t len;
	char why[256];

	host(&c);
	len = kvm_compat_profile(c.cpuid, c.nr_cpuid, c.caps, c.xsave_bytes, buf);
	TEST_CHECK(len == 16 + 10 * 24, "all 10 leaves: %zu bytes", len);
	for (size_t cut = 0; cut < len; cut++)
		TEST_CHECK(kvm_compat_from_profile(buf, cut, 1, &got, why, sizeof(why)) == -EINVAL,
			   "truncated at %zu accepted", cut);
	buf[len] = 0;
	TEST_CHECK(kvm_compat_from_profile(buf, len + 1, 1, &got, why, sizeof(why)) == -EINVAL, "trailing byte");
	buf[0] = 2;
	TEST_CHECK(kvm_compat_from_profile(buf, len, 1, &got, why, sizeof(why)) == -EINVAL, "version 2");
	buf[0] = 1;
	buf[12] = 11;
	TEST_CHECK(kvm_compat_from_profile(buf, len, 1, &got, why, sizeof(why)) == -EINVAL, "11 leaves");
	buf[12] = 10;
	buf[16 + 24] = 0x2;	/* leaf 1 -> 2: not one the check reads */
	TEST_CHECK(kvm_compat_from_profile(buf, len, 1, &got, why, sizeof(why)) == -EINVAL, "unknown leaf");
	buf[16 + 24] = 0x0;	/* leaf 1 -> 0: repeated */
	TEST_CHECK(kvm_compat_from_profile(buf, len, 1, &got, why, sizeof(why)) == -EINVAL, "repeated leaf");
}

int main(void)
{
	static struct kvm_compat src, dst;
	static const struct { uint32_t fn, idx; int reg; const char *name; } regs[] = {
		{ 1, 0, 2, "CPUID.1:ECX" }, { 1, 0, 3, "CPUID.1:EDX" }, { 6, 0, 0, "CPUID.6:EAX" },
		{ 7, 0, 1, "CPUID.7.0:EBX" }, { 7, 0, 2, "CPUID.7.0:ECX" }, { 7, 0, 3, "CPUID.7.0:EDX" },
		{ 7, 1, 0, "CPUID.7.1:EAX" }, { 0xd, 1, 0, "CPUID.0xd.1:EAX" },
		{ 0x80000001, 0, 2, "CPUID.0x80000001:ECX" }, { 0x80000001, 0, 3, "CPUID.0x80000001:EDX" },
		{ 0x80000007, 0, 3, "CPUID.0x80000007:EDX" }, { 0x80000008, 0, 1, "CPUID.0x80000008:EBX" },
	};
	static const struct { uint32_t bit; const char *name; } caps[] = {
		{ KVM_COMPAT_SREGS2, "SREGS2" }, { KVM_COMPAT_XSAVE2, "XSAVE2" }, { KVM_COMPAT_XCRS, "XCRS" },
		{ KVM_COMPAT_DEBUGREGS, "DEBUGREGS" }, { KVM_COMPAT_VCPU_EVENTS, "VCPU_EVENTS" },
		{ KVM_COMPAT_MP_STATE, "MP_STATE" }, { KVM_COMPAT_ADJUST_CLOCK, "ADJUST_CLOCK" },
		{ KVM_COMPAT_PIT2, "PIT2" }, { KVM_COMPAT_IRQCHIP, "IRQCHIP" },
	};

	host(&src);
	host(&dst);
	src.max_vcpus = 2;
	accepted(&src, &dst, "identical host");

	/* Less on the source is fine; mirrored bits are not features. */
	entry(&src, 7, 0)->ebx &= ~0x200u;
	entry(&src, 1, 0)->ecx |= 1u << 27;
	entry(&src, 7, 0)->ecx |= 1u << 4;
	src.nr_msrs = 1;
	src.caps &= ~KVM_COMPAT_PIT2;
	accepted(&src, &dst, "a smaller guest");

	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		struct kvm_cpuid_entry2 *e;
		uint32_t *r;

		host(&src);
		e = entry(&src, regs[i].fn, regs[i].idx);
		r = regs[i].reg == 0 ? &e->eax : regs[i].reg == 1 ? &e->ebx : regs[i].reg == 2 ? &e->ecx : &e->edx;
		for (unsigned b = 0; b < 32; b++) {	/* a bit the host lacks and that is a feature */
			if ((*r & (1u << b)) || (regs[i].fn == 1 && regs[i].reg == 2 && b == 27) ||
			    (regs[i].fn == 7 && regs[i].idx == 0 && regs[i].reg == 2 && b == 4))
				continue;
			*r |= 1u << b;
			break;
		}
		refused(&src, &dst, regs[i].name);
		profile_verdict(&src, &dst, -EOPNOTSUPP, regs[i].name);
	}

	host(&src);
	entry(&src, 0, 0)->ebx = 0x756e6547;	/* "Genu..." */
	refused(&src, &dst, "vendor");

	host(&src);
	entry(&src, 0xd, 0)->eax |= 0xe0;	/* AVX-512 state */
	refused(&src, &dst, "XSAVE components");

	host(&src);
	src.xsave_bytes = 8192;
	refused(&src, &dst, "XSAVE area");

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		host(&src);
		host(&dst);
		dst.caps &= ~caps[i].bit;
		refused(&src, &dst, caps[i].name);
	}
	host(&dst);

	host(&src);
	src.caps |= 1u << 30;
	refused(&src, &dst, "unknown capability");

	host(&src);
	src.max_vcpus = 65;
	refused(&src, &dst, "65 vCPUs");

	host(&src);
	src.msrs[src.nr_msrs++] = 0xc0000103;	/* TSC_AUX */
	refused(&src, &dst, "0xc0000103");
	profile_verdict(&src, &dst, 0, "an extra MSR (checked at the load)");

	host(&src);
	profile_verdict(&src, &dst, 0, "identical host");
	host(&src);
	entry(&src, 0, 0)->ebx = 0x756e6547;	/* Genu... */
	profile_verdict(&src, &dst, -EOPNOTSUPP, "another vendor");
	host(&src);
	src.xsave_bytes = 8192;
	profile_verdict(&src, &dst, -EOPNOTSUPP, "a larger XSAVE area");
	host(&src);
	src.max_vcpus = 65;
	profile_verdict(&src, &dst, -EOPNOTSUPP, "65 vCPUs");
	profile_hostile();
	TEST_EXIT();
}
