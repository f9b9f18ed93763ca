/* SPDX-License-Identifier: MIT */
/*
 * Invariant: every guest the build makes (argv[1..]) is a static ELF64
 * x86-64 executable whose loadable segments lie in the guest image window
 * [1 MiB, 2 MiB), with an entry point inside an executable segment, and the
 * VMM embeds exactly these files (kvm_guest_images[]). Read with our own
 * header decoding here, independent of the VMM's loader. No KVM needed.
 */
#include <elf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "guest_abi.h"
#include "kvm/kvm_guests.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	TEST_ASSERT(f, "open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n);
	TEST_ASSERT(buf && fread(buf, 1, (size_t)n, f) == (size_t)n, "read %s", path);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* "build/guests/guest-idle.elf" -> "idle" */
static void guest_name(const char *path, char *out, size_t len)
{
	const char *b = strrchr(path, '/');
	const char *dash;

	b = b ? b + 1 : path;
	dash = strchr(b, '-');
	snprintf(out, len, "%s", dash ? dash + 1 : b);
	if (strstr(out, ".elf"))
		*strstr(out, ".elf") = '\0';
}

static void check_file(const char *path)
{
	size_t len;
	unsigned char *buf = slurp(path, &len);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
	const struct kvm_guest_image *img;
	char name[64];
	bool entry_ok = false;
	unsigned loads = 0;

	TEST_ASSERT(len >= sizeof(*eh) && !memcmp(eh->e_ident, ELFMAG, SELFMAG), "%s: not ELF", path);
	TEST_CHECK(eh->e_ident[EI_CLASS] == ELFCLASS64, "%s: not ELF64", path);
	TEST_CHECK(eh->e_ident[EI_DATA] == ELFDATA2LSB, "%s: not little-endian", path);
	TEST_CHECK(eh->e_type == ET_EXEC, "%s: type %u, want ET_EXEC", path, eh->e_type);
	TEST_CHECK(eh->e_machine == EM_X86_64, "%s: machine %u", path, eh->e_machine);
	TEST_ASSERT(eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) <= len, "%s: phdrs", path);
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff) + i;

		TEST_CHECK(ph->p_type != PT_INTERP && ph->p_type != PT_DYNAMIC, "%s: dynamic", path);
		if (ph->p_type != PT_LOAD)
			continue;
		loads++;
		TEST_CHECK(ph->p_paddr >= GW_GUEST_IMAGE_GPA &&
			   ph->p_paddr + ph->p_memsz <= GW_GUEST_IMAGE_END,
			   "%s: segment [%#lx, +%#lx) outside the image window", path,
			   (unsigned long)ph->p_paddr, (unsigned long)ph->p_memsz);
		TEST_CHECK(ph->p_offset + ph->p_filesz <= len, "%s: segment past the file", path);
		if ((ph->p_flags & PF_X) && eh->e_entry >= ph->p_vaddr &&
		    eh->e_entry < ph->p_vaddr + ph->p_filesz)
			entry_ok = true;
	}
	TEST_CHECK(loads > 0, "%s: no PT_LOAD", path);
	TEST_CHECK(entry_ok, "%s: entry %#lx not in an executable segment", path,
		   (unsigned long)eh->e_entry);
	guest_name(path, name, sizeof(name));
	img = kvm_guest_image_find(name);
	TEST_CHECK(img && img->elf_bytes == len && !memcmp(img->elf, buf, len),
		   "%s: the VMM does not embed this file as '%s'", path, name);
	free(buf);
}

int main(int argc, char **argv)
{
	unsigned embedded = 0;

	TEST_ASSERT(argc > 1, "usage: test_guest_elf GUEST.elf...");
	for (int i = 1; i < argc; i++)
		check_file(argv[i]);
	for (const struct kvm_guest_image *g = kvm_guest_images; g->name; g++)
		embedded++;
	TEST_CHECK(embedded == (unsigned)(argc - 1), "%u guests embedded, %d built", embedded, argc - 1);
	TEST_EXIT();
}
