/* SPDX-License-Identifier: MIT */
/*
 * main() for a harness outside libFuzzer: every file named on the command
 * line (a directory: every file in it) goes through LLVMFuzzerTestOneInput
 * once. Files ending in ".hex" are hexadecimal text (whitespace and
 * "#" comments allowed): the regression inputs kept in the tree.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

static size_t unhex(const char *txt, size_t len, uint8_t *out)
{
	size_t n = 0;
	int hi = -1;

	for (size_t i = 0; i < len; i++) {
		int c = txt[i], v;

		if (c == '#') {
			while (i < len && txt[i] != '\n')
				i++;
			continue;
		}
		v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (v < 0)
			continue;
		if (hi < 0) {
			hi = v;
		} else {
			out[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	return n;
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;
	size_t n;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(len > 0 ? (size_t)len : 1);
	n = fread(buf, 1, (size_t)(len > 0 ? len : 0), f);
	fclose(f);
	if (strlen(path) > 4 && !strcmp(path + strlen(path) - 4, ".hex"))
		n = unhex((const char *)buf, n, buf);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned files = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			files += !run_file(argv[i]);
			continue;
		}
		d = opendir(argv[i]);
		while (d && (e = readdir(d))) {
			char p[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
			files += !run_file(p);
		}
		if (d)
			closedir(d);
	}
	printf("%s: %u inputs, no invariant broken\n", argv[0], files);
	return 0;
}
