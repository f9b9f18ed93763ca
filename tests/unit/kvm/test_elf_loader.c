/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the VMM's ELF loader accepts the built guests and places their
 * segments exactly (file bytes copied, the rest of each segment zeroed,
 * nothing outside written), and refuses with -ENOEXEC and a reason every
 * malformed input: short file, bad magic, 32-bit, big-endian, another
 * machine, PIE/shared object, program headers outside the file, a segment
 * outside the file, file size > memory size, virtual != physical address,
 * a segment outside the window, overlapping segments, an entry outside
 * executable code, a dynamic executable, no loadable segment. 20000 random
 * mutations of a real guest never crash it, and what it accepts stays
 * inside the window and the file. No KVM needed.
 */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "guest_abi.h"
#include "kvm/kvm_elf.h"
#include "kvm/kvm_guests.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define LO GW_GUEST_IMAGE_GPA
#define HI GW_GUEST_IMAGE_END
#define MEM_BYTES (4ull << 20)		/* guest memory from gpa 0 */

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void check_loads(const struct kvm_guest_image *g)
{
	struct kvm_elf_image img;
	char why[256] = "";
	uint8_t *mem = malloc(MEM_BYTES);

	TEST_ASSERT(mem, "malloc");
	memset(mem, 0xa5, MEM_BYTES);
	TEST_ASSERT(kvm_elf_parse(g->elf, g->elf_bytes, LO, HI, &img, why, sizeof(why)) == 0,
		    "%s refused: %s", g->name, why);
	TEST_ASSERT(kvm_elf_load(g->elf, &img, mem, 0, MEM_BYTES) == 0, "%s: load", g->name);
	for (unsigned i = 0; i < img.nr_segments; i++) {
		const struct kvm_elf_segment *s = &img.seg[i];

		TEST_CHECK(!memcmp(mem + s->gpa, g->elf + s->file_off, s->file_bytes),
			   "%s: segment %u bytes differ", g->name, i);
		for (uint64_t b = s->file_bytes; b < s->mem_bytes; b++)
			if (mem[s->gpa + b]) {
				TEST_CHECK(0, "%s: segment %u tail not zeroed", g->name, i);
				break;
			}
	}
	for (uint64_t a = 0; a < LO; a++)
		if (mem[a] != 0xa5) {
			TEST_CHECK(0, "%s: loader wrote below the window at %#lx", g->name, (unsigned long)a);
			break;
		}
	for (uint64_t a = HI; a < MEM_BYTES; a++)
		if (mem[a] != 0xa5) {
			TEST_CHECK(0, "%s: loader wrote above the window at %#lx", g->name, (unsigned long)a);
			break;
		}
	TEST_CHECK(kvm_elf_load(g->elf, &img, mem, 0, LO) == -ERANGE, "%s: load into too little memory",
		   g->name);
	free(mem);
}

static Elf64_Ehdr *eh_of(uint8_t *b) { return (Elf64_Ehdr *)b; }
static Elf64_Phdr *ph_of(uint8_t *b, unsigned i) { return (Elf64_Phdr *)(b + eh_of(b)->e_phoff) + i; }

static int first_load(uint8_t *b)
{
	for (unsigned i = 0; i < eh_of(b)->e_phnum; i++)
		if (ph_of(b, i)->p_type == PT_LOAD)
			return (int)i;
	return -1;
}

static int second_load(uint8_t *b)
{
	int first = first_load(b);

	for (unsigned i = (unsigned)first + 1; i < eh_of(b)->e_phnum; i++)
		if (ph_of(b, i)->p_type == PT_LOAD)
			return (int)i;
	return -1;
}

/* One malformed variant of the image in @b (a copy), by number. */
static const char *mutate(uint8_t *b, size_t *len, unsigned which)
{
	Elf64_Ehdr *e = eh_of(b);
	Elf64_Phdr *p = ph_of(b, (unsigned)first_load(b));
	Elf64_Phdr *q = ph_of(b, (unsigned)second_load(b));

	switch (which) {
	case 0: *len = 40; return "short file";
	case 1: b[1] = 'X'; return "bad magic";
	case 2: b[EI_CLASS] = ELFCLASS32; return "32-bit";
	case 3: b[EI_DATA] = ELFDATA2MSB; return "big-endian";
	case 4: e->e_machine = EM_AARCH64; return "another machine";
	case 5: e->e_type = ET_DYN; return "PIE";
	case 6: e->e_phoff = *len - 8; return "program headers past the file";
	case 7: e->e_phnum = 0; return "no program headers";
	case 8: p->p_offset = *len; p->p_filesz = 16; return "segment past the file";
	case 9: p->p_offset = UINT64_MAX - 4; return "segment offset overflow";
	case 10: p->p_filesz = p->p_memsz + 1; return "file size > memory size";
	case 11: p->p_vaddr += 4096; return "virtual != physical";
	case 12: p->p_paddr = HI; p->p_vaddr = HI; return "segment above the window";
	case 13: p->p_paddr = LO - 4096; p->p_vaddr = LO - 4096; return "segment below the window";
	case 14: p->p_memsz = UINT64_MAX - 8; return "segment size overflow";
	case 15: q->p_paddr = p->p_paddr; q->p_vaddr = p->p_vaddr; return "overlapping segments";
	case 16: e->e_entry = HI + 64; return "entry outside the image";
	case 17: e->e_entry = q->p_paddr; return "entry in a non-executable segment";
	case 18: p->p_type = PT_INTERP; return "dynamic (PT_INTERP)";
	case 19:
		for (unsigned i = 0; i < e->e_phnum; i++)
			if (ph_of(b, i)->p_type == PT_LOAD)
				ph_of(b, i)->p_type = PT_NOTE;
		return "no loadable segment";
	case 20: e->e_phentsize = 32; return "program header size";
	default: return NULL;
	}
}

static void check_refusals(const struct kvm_guest_image *g)
{
	uint8_t *b = malloc(g->elf_bytes);
	struct kvm_elf_image img;
	const char *what;

	TEST_ASSERT(b, "malloc");
	TEST_ASSERT(second_load((uint8_t *)g->elf) >= 0, "%s: needs two PT_LOAD segments", g->name);
	for (unsigned i = 0;; i++) {
		size_t len = g->elf_bytes;
		char why[256] = "";
		int ret;

		memcpy(b, g->elf, len);
		what = mutate(b, &len, i);
		if (!what)
			break;
		ret = kvm_elf_parse(b, len, LO, HI, &img, why, sizeof(why));
		TEST_CHECK(ret == -ENOEXEC && why[0], "%s: %s accepted (%d)", g->name, what, ret);
	}
	free(b);
}

static void fuzz(const struct kvm_guest_image *g, unsigned rounds)
{
	uint8_t *b = malloc(g->elf_bytes);
	struct kvm_elf_image img;
	char why[256];

	TEST_ASSERT(b, "malloc");
	for (unsigned r = 0; r < rounds; r++) {
		size_t len = g->elf_bytes;
		unsigned flips = 1 + rnd() % 8;

		memcpy(b, g->elf, len);
		for (unsigned f = 0; f < flips; f++) {
			/* Mostly the headers, where the decisions are. */
			size_t at = rnd() % 4 ? rnd() % 256 : rnd() % len;

			b[at] ^= (uint8_t)(1u << (rnd() % 8));
		}
		if (rnd() % 16 == 0)
			len = rnd() % len;
		if (kvm_elf_parse(b, len, LO, HI, &img, why, sizeof(why)) != 0)
			continue;
		for (unsigned i = 0; i < img.nr_segments; i++) {
			const struct kvm_elf_segment *s = &img.seg[i];

			TEST_CHECK(s->gpa >= LO && s->gpa + s->mem_bytes <= HI && s->gpa + s->mem_bytes >= s->gpa,
				   "fuzz %u: accepted segment outside the window", r);
			TEST_CHECK(s->file_off + s->file_bytes <= len && s->file_bytes <= s->mem_bytes,
				   "fuzz %u: accepted segment outside the file", r);
		}
	}
	free(b);
}

int main(void)
{
	unsigned n = 0;

	for (const struct kvm_guest_image *g = kvm_guest_images; g->name; g++, n++) {
		check_loads(g);
		check_refusals(g);
	}
	TEST_ASSERT(n >= 3, "only %u guests embedded", n);
	fuzz(&kvm_guest_images[0], 20000);
	TEST_EXIT();
}
