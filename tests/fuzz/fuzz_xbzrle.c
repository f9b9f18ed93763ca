/* SPDX-License-Identifier: MIT */
/*
 * The XBZRLE decoder on hostile deltas, against a page followed by an
 * inaccessible one: it never writes outside the page and returns 0 or
 * -EBADMSG. Input byte 0 odd: a round trip instead (the rest split into an
 * old and a new page: decoding the encoding of new against old gives new).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "codec/xbzrle.h"
#include "fuzz.h"

#define PAGE 4096

static uint8_t *page;		/* one page, then a PROT_NONE guard */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	page = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fuzz_check(page != MAP_FAILED && !mprotect(page + PAGE, PAGE, PROT_NONE), "guarded page");
	return 0;
}

static void roundtrip(const uint8_t *data, size_t size)
{
	static uint8_t old[PAGE], new[PAGE], delta[PAGE];
	size_t half = size / 2;
	ssize_t n;

	memset(old, 0, PAGE);
	memcpy(old, data, half < PAGE ? half : PAGE);
	memcpy(new, old, PAGE);
	/* The second half is a list of (offset, byte) changes: deltas of every shape. */
	for (size_t i = half; i + 2 < size; i += 3)
		new[(data[i] | data[i + 1] << 8) % PAGE] = data[i + 2];
	n = gw_xbzrle_encode(old, new, PAGE, delta, sizeof(delta));
	if (n < 0) {
		fuzz_check(n == -ENOSPC, "encode: a delta fits or -ENOSPC");
		return;
	}
	memcpy(page, old, PAGE);
	fuzz_check(gw_xbzrle_decode(delta, (size_t)n, page, PAGE) == 0, "own encoding decodes");
	fuzz_check(!memcmp(page, new, PAGE), "round trip gives the new page");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int ret;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		roundtrip(data + 1, size - 1);
		return 0;
	}
	memset(page, 0x5a, PAGE);
	ret = gw_xbzrle_decode(data + 1, size - 1, page, PAGE);
	fuzz_check(ret == 0 || ret == -EBADMSG, "decode result");
	return 0;
}
