/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the boot structures the VMM writes put a vCPU in 64-bit mode
 * over an identity map of both RAM blocks. A software page walk (4-level,
 * written here independently of the builder) translates every 2 MiB of
 * block "sys", of block "ram" and of the device and IOAPIC windows
 * to itself, writable, for RAM sizes from
 * 2 MiB to 1 TiB (two PDPTs past 512 GiB), and faults outside them; the page
 * tables fit the sys block and use the predicted number of pages. The GDT's
 * descriptors, decoded here, match the segment registers the vCPU gets
 * (code: 64-bit, DPL 0; data: writable; TSS: busy 64-bit, base and limit);
 * CR0/CR4/EFER enable paging, PAE and long mode, CR3 is the PML4. No KVM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "guest_abi.h"
#include "kvm/kvm_boot.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The page tables live in @area at guest address @area_gpa. 0 = fault, else the PA (+1 when RO). */
static uint64_t walk(const uint8_t *area, uint64_t area_bytes, uint64_t area_gpa, uint64_t cr3,
		     uint64_t va)
{
	uint64_t table = cr3 & KVM_PTE_ADDR_MASK;
	const unsigned shift[3] = { 39, 30, 21 };

	for (unsigned level = 0; level < 3; level++) {
		uint64_t off = table - area_gpa + ((va >> shift[level]) & 511) * 8, e;

		TEST_ASSERT(table >= area_gpa && off + 8 <= area_bytes, "table %#lx outside the area",
			    (unsigned long)table);
		e = rd64(area + off);
		if (!(e & KVM_PTE_P))
			return 0;
		if (!(e & KVM_PTE_RW))
			return 1;
		if (level == 2) {
			TEST_CHECK(e & KVM_PTE_PS, "PD entry for %#lx is not a 2 MiB page", (unsigned long)va);
			return (e & KVM_PTE_ADDR_MASK & ~(KVM_BOOT_HUGE_BYTES - 1)) + (va & (KVM_BOOT_HUGE_BYTES - 1));
		}
		TEST_CHECK(!(e & KVM_PTE_PS), "huge page at level %u for %#lx", level, (unsigned long)va);
		table = e & KVM_PTE_ADDR_MASK;
	}
	return 0;
}

static void check_ram(uint64_t ram_bytes)
{
	struct kvm_boot_range r[KVM_BOOT_RANGES];
	uint64_t sys = kvm_boot_sys_bytes(ram_bytes), pt_bytes = sys - GW_GUEST_PT_GPA, used;
	uint8_t *area = calloc(1, pt_bytes);
	unsigned n = kvm_boot_ranges(ram_bytes, r);
	uint64_t step;

	TEST_ASSERT(area, "calloc %llu", (unsigned long long)pt_bytes);
	TEST_CHECK(sys % KVM_BOOT_HUGE_BYTES == 0 && sys > GW_GUEST_PT_GPA, "sys size %#llx",
		   (unsigned long long)sys);
	TEST_ASSERT(kvm_boot_pt_build(area, pt_bytes, GW_GUEST_PT_GPA, r, n) == 0,
		    "RAM %llu: page tables do not fit", (unsigned long long)ram_bytes);
	used = kvm_boot_pt_pages(r, n);
	TEST_CHECK(used * 4096 <= pt_bytes, "predicted %llu pages > area", (unsigned long long)used);
	TEST_CHECK(kvm_boot_pt_build(area, (used - 1) * 4096, GW_GUEST_PT_GPA, r, n) == -ENOSPC,
		   "RAM %llu: built in fewer pages than predicted", (unsigned long long)ram_bytes);
	memset(area, 0, pt_bytes);
	TEST_ASSERT(kvm_boot_pt_build(area, pt_bytes, GW_GUEST_PT_GPA, r, n) == 0, "rebuild");
	for (uint64_t a = 0; a < sys; a += KVM_BOOT_HUGE_BYTES / 2)
		TEST_CHECK(walk(area, pt_bytes, GW_GUEST_PT_GPA, GW_GUEST_PT_GPA, a + 8) == a + 8,
			   "sys %#llx not identity-mapped", (unsigned long long)a);
	step = ram_bytes > 64 * GIB ? 1021 * MIB : KVM_BOOT_HUGE_BYTES / 2;
	for (uint64_t a = 0; a < ram_bytes; a += step) {
		uint64_t va = GW_GUEST_RAM_GPA + a + 0x123;

		TEST_CHECK(walk(area, pt_bytes, GW_GUEST_PT_GPA, GW_GUEST_PT_GPA, va) == va,
			   "ram %#llx not identity-mapped", (unsigned long long)va);
	}
	TEST_CHECK(walk(area, pt_bytes, GW_GUEST_PT_GPA, GW_GUEST_PT_GPA,
			GW_GUEST_RAM_GPA + ram_bytes - 8) == GW_GUEST_RAM_GPA + ram_bytes - 8, "ram end");
	TEST_CHECK(walk(area, pt_bytes, GW_GUEST_PT_GPA, GW_GUEST_PT_GPA, 2 * GIB) == 0,
		   "the 32-bit hole is mapped");
	for (unsigned i = 0; i < GW_GUEST_NET_MAX_NICS; i++) {
		uint64_t va = GW_GUEST_DEV_GPA + i * GW_GUEST_DEV_STRIDE_BYTES + 0x70;

		TEST_CHECK(walk(area, pt_bytes, GW_GUEST_PT_GPA, GW_GUEST_PT_GPA, va) == va,
			   "NIC %u's register page not identity-mapped", i);
	}
	TEST_CHECK(walk(area, pt_bytes, GW_GUEST_PT_GPA, GW_GUEST_PT_GPA, GW_GUEST_IOAPIC_GPA + 0x10) ==
		   GW_GUEST_IOAPIC_GPA + 0x10, "the IOAPIC not identity-mapped");
	TEST_CHECK(walk(area, pt_bytes, GW_GUEST_PT_GPA, GW_GUEST_PT_GPA,
			GW_GUEST_RAM_GPA + ram_bytes + 2 * KVM_BOOT_HUGE_BYTES) == 0, "past RAM is mapped");
	free(area);
}

struct desc {
	uint64_t base;
	uint32_t limit;			/* in bytes - 1, granularity applied */
	unsigned type, s, dpl, p, avl, l, db, g;
};

static struct desc decode(const uint8_t *gdt, unsigned sel)
{
	uint64_t lo = rd64(gdt + sel), hi = rd64(gdt + sel + 8);
	struct desc d;
	uint32_t raw = (uint32_t)((lo & 0xffff) | ((lo >> 48) & 0xf) << 16);

	d.type = (lo >> 40) & 0xf;
	d.s = (lo >> 44) & 1;
	d.dpl = (lo >> 45) & 3;
	d.p = (lo >> 47) & 1;
	d.avl = (lo >> 52) & 1;
	d.l = (lo >> 53) & 1;
	d.db = (lo >> 54) & 1;
	d.g = (lo >> 55) & 1;
	d.base = ((lo >> 16) & 0xffffff) | ((lo >> 56) & 0xff) << 24;
	if (!d.s)
		d.base |= (hi & 0xffffffffull) << 32;
	d.limit = d.g ? raw << 12 | 0xfff : raw;
	return d;
}

static void same(const char *what, const struct desc *d, const struct kvm_segment *s)
{
	TEST_CHECK(d->base == s->base && d->limit == s->limit && d->type == s->type &&
		   d->s == s->s && d->dpl == s->dpl && d->p == s->present && d->l == s->l &&
		   d->db == s->db && d->g == s->g && d->avl == s->avl,
		   "%s: GDT descriptor and segment register disagree", what);
}

static void check_gdt_and_sregs(void)
{
	uint8_t gdt[4096], tss[104];
	struct kvm_sregs s;
	uint16_t limit = kvm_boot_gdt_build(gdt, GW_GUEST_TSS_GPA);
	struct desc code = decode(gdt, GW_GUEST_SEL_CODE), data = decode(gdt, GW_GUEST_SEL_DATA);
	struct desc tssd = decode(gdt, GW_GUEST_SEL_TSS);

	TEST_CHECK(rd64(gdt) == 0, "GDT entry 0 not null");
	memset(&s, 0, sizeof(s));
	s.apic_base = 0xfee00900;
	kvm_boot_sregs(&s, GW_GUEST_PT_GPA, true);
	TEST_CHECK(limit == s.gdt.limit && s.gdt.base == GW_GUEST_GDT_GPA, "GDT base/limit");
	TEST_CHECK(code.l && !code.db && code.p && code.s && (code.type & 8) && code.dpl == 0,
		   "code descriptor is not 64-bit ring-0 code");
	TEST_CHECK(data.p && data.s && !(data.type & 8) && (data.type & 2), "data descriptor not writable data");
	TEST_CHECK(!tssd.s && tssd.type == 0xb && tssd.base == GW_GUEST_TSS_GPA && tssd.limit >= 0x67,
		   "TSS descriptor");
	same("cs", &code, &s.cs);
	same("ds", &data, &s.ds);
	same("es", &data, &s.es);
	same("fs", &data, &s.fs);
	same("gs", &data, &s.gs);
	same("ss", &data, &s.ss);
	same("tr", &tssd, &s.tr);
	TEST_CHECK(s.cs.selector == GW_GUEST_SEL_CODE && s.ss.selector == GW_GUEST_SEL_DATA &&
		   s.tr.selector == GW_GUEST_SEL_TSS, "selectors");
	TEST_CHECK(s.ldt.unusable, "LDT usable");
	TEST_CHECK((s.cr0 & (KVM_CR0_PE | KVM_CR0_PG)) == (KVM_CR0_PE | KVM_CR0_PG), "CR0 %#llx",
		   (unsigned long long)s.cr0);
	TEST_CHECK((s.cr4 & (KVM_CR4_PAE | KVM_CR4_OSFXSR | KVM_CR4_OSXSAVE)) ==
		   (KVM_CR4_PAE | KVM_CR4_OSFXSR | KVM_CR4_OSXSAVE), "CR4 %#llx", (unsigned long long)s.cr4);
	TEST_CHECK((s.efer & (KVM_EFER_LME | KVM_EFER_LMA)) == (KVM_EFER_LME | KVM_EFER_LMA), "EFER");
	TEST_CHECK(s.cr3 == GW_GUEST_PT_GPA && s.apic_base == 0xfee00900, "CR3 / APIC base");
	kvm_boot_sregs(&s, GW_GUEST_PT_GPA, false);
	TEST_CHECK(!(s.cr4 & KVM_CR4_OSXSAVE), "OSXSAVE without XSAVE");
	memset(tss, 0xff, sizeof(tss));
	kvm_boot_tss_build(tss);
	TEST_CHECK(tss[102] == 104 && tss[103] == 0 && tss[4] == 0, "TSS content");
}

int main(void)
{
	static const uint64_t sizes[] = {
		2 * MIB, 4 * MIB + 4096, 1 * GIB, 1 * GIB + 2 * MIB, 7 * GIB + 12 * MIB,
		600 * GIB, 1024 * GIB,
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_ram(sizes[i]);
	check_gdt_and_sregs();
	TEST_EXIT();
}
