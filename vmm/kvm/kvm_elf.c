/* SPDX-License-Identifier: MIT */
/* ELF64 loader for the guests (kvm_elf.h). Fields are read little-endian by hand. */
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "kvm/kvm_elf.h"

static uint64_t rd(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

__attribute__((format(printf, 3, 4)))
static int refuse(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return -ENOEXEC;
}

static int check_header(const uint8_t *e, size_t len, char *why, size_t why_len)
{
	if (len < sizeof(Elf64_Ehdr))
		return refuse(why, why_len, "%zu bytes: shorter than an ELF64 header", len);
	if (memcmp(e, ELFMAG, SELFMAG))
		return refuse(why, why_len, "not an ELF file (bad magic)");
	if (e[EI_CLASS] != ELFCLASS64)
		return refuse(why, why_len, "not ELF64 (class %u)", e[EI_CLASS]);
	if (e[EI_DATA] != ELFDATA2LSB)
		return refuse(why, why_len, "not little-endian (data %u)", e[EI_DATA]);
	if (e[EI_VERSION] != EV_CURRENT || rd(e + 20, 4) != EV_CURRENT)
		return refuse(why, why_len, "unknown ELF version");
	if (rd(e + 16, 2) != ET_EXEC)
		return refuse(why, why_len, "not an executable (type %u): guests are linked static, no PIE",
			      (unsigned)rd(e + 16, 2));
	if (rd(e + 18, 2) != EM_X86_64)
		return refuse(why, why_len, "not x86-64 (machine %u)", (unsigned)rd(e + 18, 2));
	if (rd(e + 54, 2) != sizeof(Elf64_Phdr))
		return refuse(why, why_len, "program header size %u, expected %zu",
			      (unsigned)rd(e + 54, 2), sizeof(Elf64_Phdr));
	return 0;
}

static int add_segment(const uint8_t *ph, size_t len, uint64_t lo, uint64_t hi,
		       struct kvm_elf_image *img, char *why, size_t why_len)
{
	uint64_t off = rd(ph + 8, 8), vaddr = rd(ph + 16, 8), paddr = rd(ph + 24, 8);
	uint64_t filesz = rd(ph + 32, 8), memsz = rd(ph + 40, 8);
	struct kvm_elf_segment *s;

	if (img->nr_segments == KVM_ELF_MAX_SEGMENTS)
		return refuse(why, why_len, "more than %d loadable segments", KVM_ELF_MAX_SEGMENTS);
	if (filesz > memsz)
		return refuse(why, why_len, "segment at %#llx: file size %llu > memory size %llu",
			      (unsigned long long)paddr, (unsigned long long)filesz,
			      (unsigned long long)memsz);
	if (off > len || filesz > len - off)
		return refuse(why, why_len, "segment at %#llx: bytes [%llu, +%llu) outside the %zu-byte file",
			      (unsigned long long)paddr, (unsigned long long)off,
			      (unsigned long long)filesz, len);
	if (vaddr != paddr)
		return refuse(why, why_len, "segment virtual %#llx != physical %#llx (identity-mapped guests only)",
			      (unsigned long long)vaddr, (unsigned long long)paddr);
	if (paddr < lo || paddr > hi || memsz > hi - paddr)
		return refuse(why, why_len, "segment [%#llx, +%llu) outside the image window [%#llx, %#llx)",
			      (unsigned long long)paddr, (unsigned long long)memsz,
			      (unsigned long long)lo, (unsigned long long)hi);
	for (unsigned i = 0; i < img->nr_segments; i++) {
		const struct kvm_elf_segment *o = &img->seg[i];

		if (memsz && o->mem_bytes && paddr < o->gpa + o->mem_bytes && o->gpa < paddr + memsz)
			return refuse(why, why_len, "segments at %#llx and %#llx overlap",
				      (unsigned long long)paddr, (unsigned long long)o->gpa);
	}
	s = &img->seg[img->nr_segments++];
	s->gpa = paddr;
	s->file_off = off;
	s->file_bytes = filesz;
	s->mem_bytes = memsz;
	s->flags = (uint32_t)rd(ph + 4, 4);
	return 0;
}

int kvm_elf_parse(const void *elf, size_t len, uint64_t lo_gpa, uint64_t hi_gpa,
		  struct kvm_elf_image *img, char *why, size_t why_len)
{
	const uint8_t *e = elf;
	uint64_t phoff, phnum;
	int ret;

	memset(img, 0, sizeof(*img));
	if (!e)
		return refuse(why, why_len, "no image");
	ret = check_header(e, len, why, why_len);
	if (ret)
		return ret;
	phoff = rd(e + 32, 8);
	phnum = rd(e + 56, 2);
	if (phnum == 0 || phnum == 0xffff)
		return refuse(why, why_len, "%llu program headers", (unsigned long long)phnum);
	if (phoff > len || phnum * sizeof(Elf64_Phdr) > len - phoff)
		return refuse(why, why_len, "program headers [%llu, +%llu) outside the %zu-byte file",
			      (unsigned long long)phoff,
			      (unsigned long long)(phnum * sizeof(Elf64_Phdr)), len);
	for (uint64_t i = 0; i < phnum; i++) {
		const uint8_t *ph = e + phoff + i * sizeof(Elf64_Phdr);
		uint32_t type = (uint32_t)rd(ph, 4);

		if (type == PT_INTERP || type == PT_DYNAMIC)
			return refuse(why, why_len, "dynamic executable (program header type %u)", type);
		if (type != PT_LOAD)
			continue;
		ret = add_segment(ph, len, lo_gpa, hi_gpa, img, why, why_len);
		if (ret)
			return ret;
	}
	if (!img->nr_segments)
		return refuse(why, why_len, "no loadable segment");
	img->entry = rd(e + 24, 8);
	for (unsigned i = 0; i < img->nr_segments; i++) {
		const struct kvm_elf_segment *s = &img->seg[i];

		if ((s->flags & PF_X) && img->entry >= s->gpa && img->entry - s->gpa < s->file_bytes)
			return 0;
	}
	return refuse(why, why_len, "entry point %#llx is not inside an executable segment",
		      (unsigned long long)img->entry);
}

int kvm_elf_load(const void *elf, const struct kvm_elf_image *img, uint8_t *mem,
		 uint64_t mem_gpa, uint64_t mem_bytes)
{
	const uint8_t *e = elf;

	for (unsigned i = 0; i < img->nr_segments; i++) {
		const struct kvm_elf_segment *s = &img->seg[i];

		if (s->gpa < mem_gpa || s->gpa - mem_gpa > mem_bytes ||
		    s->mem_bytes > mem_bytes - (s->gpa - mem_gpa))
			return -ERANGE;
	}
	for (unsigned i = 0; i < img->nr_segments; i++) {
		const struct kvm_elf_segment *s = &img->seg[i];
		uint8_t *dst = mem + (s->gpa - mem_gpa);

		memcpy(dst, e + s->file_off, s->file_bytes);
		memset(dst + s->file_bytes, 0, s->mem_bytes - s->file_bytes);
	}
	return 0;
}
