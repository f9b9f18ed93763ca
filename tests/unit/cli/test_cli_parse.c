// SPDX-License-Identifier: MIT
/*
 * Invariant: the command line's value parsers accept exactly the documented
 * spellings and reject the rest without wrapping around: sizes and rates
 * use powers of 1024 (K/M/G/T, optional "iB"/"B", fractions with a suffix
 * round down), 2^64 and above is -ERANGE, durations take ns/us/ms/s or the
 * caller's default unit, PARAM=VALUE resolves names through the engine's
 * parameter table and checks its bounds, "zstd:3" gives codec and level.
 * The host memory check reads /proc/meminfo's figures and refuses, with
 * the figures and a size the user can type, a VM larger than RAM and swap,
 * or one allocated whole (at start, or both of demo's) larger than what
 * is available now.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <godwit/godwit.h>

#include "common/cli_parse.h"
#include "common/hostmem.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static void size_ok(const char *s, uint64_t want)
{
	uint64_t v = 0;
	int r = cli_parse_size(s, &v);

	TEST_CHECK(r == 0 && v == want, "size '%s': r=%d v=%llu want %llu", s, r,
		   (unsigned long long)v, (unsigned long long)want);
}

static void size_bad(const char *s, int want)
{
	uint64_t v = 12345;
	int r = cli_parse_size(s, &v);

	TEST_CHECK(r == want && v == 12345, "size '%s': r=%d want %d (v=%llu untouched?)", s, r,
		   want, (unsigned long long)v);
}

static void test_sizes(void)
{
	size_ok("0", 0);
	size_ok("4096", 4096);
	size_ok("100B", 100);
	size_ok("1K", 1024);
	size_ok("1k", 1024);
	size_ok("512M", 512ull << 20);
	size_ok("1G", 1ull << 30);
	size_ok("1g", 1ull << 30);
	size_ok("64MiB", 64ull << 20);
	size_ok("2GB", 2ull << 30);
	size_ok("1T", 1ull << 40);
	size_ok("1.5G", 3ull << 29);
	size_ok("0.5K", 512);
	size_ok("1.0001K", 1024);		/* 1024.1 rounds down */
	size_ok("18446744073709551615", UINT64_MAX);
	size_ok("16777215T", 16777215ull << 40);
	size_bad("18446744073709551616", -ERANGE);
	size_bad("16777216T", -ERANGE);
	size_bad("99999999999999999999999", -ERANGE);
	size_bad("", -EINVAL);
	size_bad("G", -EINVAL);
	size_bad("-1", -EINVAL);
	size_bad("+1", -EINVAL);
	size_bad(" 1", -EINVAL);
	size_bad("1 ", -EINVAL);
	size_bad("1X", -EINVAL);
	size_bad("1GG", -EINVAL);
	size_bad("1.5", -EINVAL);		/* a fraction of a byte */
	size_bad("1.", -EINVAL);
	size_bad("1.G", -EINVAL);
	size_bad("0x10", -EINVAL);
	size_bad("1G/s", -EINVAL);		/* that is a rate */
}

static void test_rates(void)
{
	uint64_t v = 0;

	TEST_CHECK(!cli_parse_rate("100M", &v) && v == 100ull << 20, "100M -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(!cli_parse_rate("1G/s", &v) && v == 1ull << 30, "1G/s -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(!cli_parse_rate("0", &v) && v == 0, "0 -> %llu", (unsigned long long)v);
	TEST_CHECK(cli_parse_rate("1G/h", &v) == -EINVAL, "1G/h accepted");
	TEST_CHECK(cli_parse_rate("20000000T", &v) == -ERANGE, "20000000T accepted");
}

static void test_durations(void)
{
	const uint64_t ms = 1000000;
	uint64_t v = 0;

	TEST_CHECK(!cli_parse_duration("300", ms, &v) && v == 300 * ms, "300 -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(!cli_parse_duration("0.5", ms, &v) && v == ms / 2, "0.5 -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(!cli_parse_duration("250us", ms, &v) && v == 250000, "250us -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(!cli_parse_duration("2s", ms, &v) && v == 2000000000ull, "2s -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(!cli_parse_duration("7ns", ms, &v) && v == 7, "7ns -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(!cli_parse_duration("1.5ms", 1, &v) && v == 1500000, "1.5ms -> %llu",
		   (unsigned long long)v);
	TEST_CHECK(cli_parse_duration("5m", ms, &v) == -EINVAL, "5m accepted");
	TEST_CHECK(cli_parse_duration("-1", ms, &v) == -EINVAL, "-1 accepted");
	TEST_CHECK(cli_parse_duration("ms", ms, &v) == -EINVAL, "ms accepted");
	TEST_CHECK(cli_parse_duration("18446744073710", ms, &v) == -ERANGE, "overflow accepted");
}

static void test_ints(void)
{
	int64_t v = 0;

	TEST_CHECK(!cli_parse_int("42", 0, 100, &v) && v == 42, "42 -> %lld", (long long)v);
	TEST_CHECK(!cli_parse_int("-3", -5, 5, &v) && v == -3, "-3 -> %lld", (long long)v);
	TEST_CHECK(!cli_parse_int("-9223372036854775808", INT64_MIN, 0, &v) && v == INT64_MIN,
		   "INT64_MIN -> %lld", (long long)v);
	TEST_CHECK(!cli_parse_int("9223372036854775807", 0, INT64_MAX, &v) && v == INT64_MAX,
		   "INT64_MAX");
	TEST_CHECK(cli_parse_int("9223372036854775808", 0, INT64_MAX, &v) == -ERANGE, "2^63");
	TEST_CHECK(cli_parse_int("101", 0, 100, &v) == -ERANGE, "101 in [0,100]");
	TEST_CHECK(cli_parse_int("0", 1, 64, &v) == -ERANGE, "0 in [1,64]");
	TEST_CHECK(cli_parse_int("1K", 0, INT64_MAX, &v) == -EINVAL, "1K as int");
	TEST_CHECK(cli_parse_int("1.0", 0, 9, &v) == -EINVAL, "1.0 as int");
	TEST_CHECK(cli_parse_int("", 0, 9, &v) == -EINVAL, "empty int");
	TEST_CHECK(cli_parse_int("-", -9, 9, &v) == -EINVAL, "'-' as int");
}

static void test_codecs(void)
{
	enum gw_codec_id id = GW_CODEC_NONE;
	int64_t level = 99;

	TEST_CHECK(!cli_parse_codec("zstd", &id, &level) && id == GW_CODEC_ZSTD && level == 0,
		   "zstd -> %d/%lld", id, (long long)level);
	TEST_CHECK(!cli_parse_codec("zstd:3", &id, &level) && id == GW_CODEC_ZSTD && level == 3,
		   "zstd:3 -> %d/%lld", id, (long long)level);
	TEST_CHECK(!cli_parse_codec("zstd:-5", &id, &level) && level == -5, "zstd:-5");
	TEST_CHECK(!cli_parse_codec("lz4", &id, &level) && id == GW_CODEC_LZ4, "lz4 -> %d", id);
	TEST_CHECK(!cli_parse_codec("none", &id, &level) && id == GW_CODEC_NONE, "none -> %d", id);
	TEST_CHECK(cli_parse_codec("brotli", &id, &level) == -ENOENT, "brotli accepted");
	TEST_CHECK(cli_parse_codec("zstd:", &id, &level) == -EINVAL, "zstd: accepted");
	TEST_CHECK(cli_parse_codec("zstd:x", &id, &level) == -EINVAL, "zstd:x accepted");
	TEST_CHECK(cli_parse_codec(":3", &id, &level) == -EINVAL, ":3 accepted");
	TEST_CHECK(cli_parse_codec("", &id, &level) == -EINVAL, "empty accepted");
}

static void param_ok(const char *assign, enum gw_param want_p, int64_t want_v)
{
	enum gw_param p = GW_PARAM__COUNT;
	int64_t v = -12345;
	char err[256] = "";
	int r = cli_parse_param(assign, &p, &v, err, sizeof(err));

	TEST_CHECK(r == 0 && p == want_p && v == want_v, "'%s': r=%d p=%d v=%lld (%s)", assign, r,
		   p, (long long)v, err);
}

static void param_bad(const char *assign, int want)
{
	enum gw_param p;
	int64_t v;
	char err[256] = "";
	int r = cli_parse_param(assign, &p, &v, err, sizeof(err));

	TEST_CHECK(r == want && err[0], "'%s': r=%d want %d, err '%s'", assign, r, want, err);
}

static void test_params(void)
{
	const struct gw_param_info *ch = gw_param_info(GW_PARAM_CHANNELS);
	char buf[64];
	int p;

	/* Every name of the table parses back to its parameter. */
	for (p = 0; p < GW_PARAM__COUNT; p++) {
		const struct gw_param_info *pi = gw_param_info((enum gw_param)p);

		TEST_ASSERT(pi && pi->name, "no info for parameter %d", p);
		snprintf(buf, sizeof(buf), "%s=%lld", pi->name, (long long)pi->def);
		param_ok(buf, (enum gw_param)p, pi->def);
	}
	param_ok("max-bandwidth-bps=100M", GW_PARAM_MAX_BANDWIDTH_BPS, 100ll << 20);
	param_ok("compress=zstd", GW_PARAM_COMPRESS, GW_CODEC_ZSTD);
	param_ok("compress=2", GW_PARAM_COMPRESS, 2);
	param_ok("dirty-backend=uffd-wp", GW_PARAM_DIRTY_BACKEND, GW_DIRTY_UFFD_WP);
	param_ok("converge-policy=force", GW_PARAM_CONVERGE_POLICY, GW_CONVERGE_FORCE);
	param_ok("verify=no", GW_PARAM_VERIFY, 0);
	param_ok("local=on", GW_PARAM_LOCAL, 1);
	/* The names docs/params.md and docs/security.md give. */
	param_ok("send-path=zerocopy", GW_PARAM_SEND_PATH, GW_SEND_ZEROCOPY);
	param_ok("send-path=copy", GW_PARAM_SEND_PATH, GW_SEND_COPY);
	param_ok("send-path=live", GW_PARAM_SEND_PATH, GW_SEND_LIVE);
	param_ok("send-path=pread", GW_PARAM_SEND_PATH, GW_SEND_PREAD);
	param_ok("send-path=auto", GW_PARAM_SEND_PATH, GW_SEND_AUTO);
	param_ok("recv-path=file", GW_PARAM_RECV_PATH, GW_RECV_FILE);
	param_ok("recv-path=auto", GW_PARAM_RECV_PATH, GW_RECV_AUTO);
	param_ok("dirty-limit-start=start", GW_PARAM_DIRTY_LIMIT_START, GW_DIRTY_LIMIT_FROM_START);
	param_bad("recv-path=yes", -EINVAL);	/* an enum of two values is not a boolean */
	param_bad("send-path=sendfile", -EINVAL);
	param_bad("no-such-param=1", -ENOENT);
	param_bad("channels", -EINVAL);
	param_bad("=3", -EINVAL);
	param_bad("channels=", -EINVAL);
	param_bad("channels=abc", -EINVAL);
	param_bad("compress=brotli", -EINVAL);
	param_bad("max-bandwidth-bps=99999999999999999999", -ERANGE);
	snprintf(buf, sizeof(buf), "channels=%lld", (long long)ch->max + 1);
	param_bad(buf, -ERANGE);
	snprintf(buf, sizeof(buf), "channels=%lld", (long long)ch->min - 1);
	param_bad(buf, -ERANGE);
}

/* Every value of a parameter with names has one, and that name parses back to the value. */
static void test_value_names(void)
{
	static const enum gw_param named[] = {
		GW_PARAM_COMPRESS, GW_PARAM_CONVERGE_POLICY, GW_PARAM_DIRTY_BACKEND,
		GW_PARAM_DIRTY_LIMIT_START, GW_PARAM_SEND_PATH, GW_PARAM_RECV_PATH,
	};
	char err[256];

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		const struct gw_param_info *pi = gw_param_info(named[i]);
		char names[128];

		cli_param_value_names(named[i], names, sizeof(names));
		TEST_CHECK(names[0], "%s: no value names", pi->name);
		for (int64_t v = pi->min; v <= pi->max; v++) {
			const char *n = cli_param_value_name(named[i], v);
			int64_t back = -1;

			TEST_CHECK(n && strstr(names, n), "%s=%lld has no name in '%s'", pi->name,
				   (long long)v, names);
			if (!n)
				continue;
			TEST_CHECK(!cli_parse_param_value(named[i], n, &back, err, sizeof(err)) && back == v,
				   "%s=%s parses to %lld: %s", pi->name, n, (long long)back, err);
		}
	}
}

static void test_fmt(void)
{
	char b[32];

	TEST_CHECK(!strcmp(cli_fmt_bytes(512, b, sizeof(b)), "512 B"), "512 -> %s", b);
	TEST_CHECK(!strcmp(cli_fmt_bytes(3ull << 29, b, sizeof(b)), "1.50 GiB"), "1.5G -> %s", b);
	TEST_CHECK(!strcmp(cli_fmt_bytes(UINT64_MAX, b, sizeof(b)), "16.00 EiB"), "max -> %s", b);
}

#define GIB (1ull << 30)

static void test_hostmem(void)
{
	struct cli_host_mem h = { .ram_bytes = 23 * GIB + GIB / 2, .available_bytes = 20 * GIB + GIB / 2 }, r;
	char path[] = "/tmp/gw-meminfo.XXXXXX", why[400];
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	TEST_ASSERT(f, "temporary file");
	fputs("MemTotal:       24641536 kB\nMemFree:        1 kB\nMemAvailable:   21495808 kB\n"
	      "SwapTotal:      1048576 kB\nSwapFree:       524288 kB\n", f);
	fclose(f);
	TEST_CHECK(cli_host_mem_read(path, &r) == 0 && r.ram_bytes == 24641536ull << 10 &&
		   r.available_bytes == 21495808ull << 10 && r.swap_bytes == GIB && r.swap_free_bytes == GIB / 2,
		   "meminfo read: %llu %llu %llu %llu", (unsigned long long)r.ram_bytes,
		   (unsigned long long)r.available_bytes, (unsigned long long)r.swap_bytes,
		   (unsigned long long)r.swap_free_bytes);
	unlink(path);
	TEST_CHECK(cli_host_mem_read("/nonexistent/meminfo", &r) == -ENOENT, "missing file");

	TEST_CHECK(cli_memory_fits(&h, 16 * GIB, 1, "--prealloc allocates all of it at start", "", why,
				   sizeof(why)) == 0, "16G fits");
	TEST_CHECK(cli_memory_fits(&h, 23 * GIB, 0, "", "", why, sizeof(why)) == 0, "23G mapped only fits");
	TEST_CHECK(cli_memory_fits(&h, 1ull << 40, 0, "", "", why, sizeof(why)) == -ENOMEM &&
		   strstr(why, "more than this host's memory (23.5G of RAM, no swap)") &&
		   strstr(why, "give --memory 23G or less"), "1T: %s", why);
	TEST_CHECK(cli_memory_fits(&h, 23 * GIB, 1, "--prealloc allocates all of it at start",
				   ", or leave out --prealloc", why, sizeof(why)) == -ENOMEM &&
		   !strcmp(why, "--prealloc allocates all of it at start: 23G, more than the 20.5G this "
			   "host has available now (of 23.5G of RAM, no swap): give --memory 20G or less, "
			   "or leave out --prealloc"), "23G prealloc: %s", why);
	TEST_CHECK(cli_memory_fits(&h, 12 * GIB, 2, "both VMs use all of theirs", "", why, sizeof(why)) == -ENOMEM &&
		   strstr(why, "both VMs use all of theirs: 24G,") && strstr(why, "give --memory 10G or less"),
		   "two VMs of 12G: %s", why);
	h.swap_bytes = h.swap_free_bytes = 4 * GIB;
	TEST_CHECK(cli_memory_fits(&h, 23 * GIB, 1, "--prealloc", "", why, sizeof(why)) == 0,
		   "23G prealloc with 4G of free swap fits");
	TEST_CHECK(cli_memory_fits(&h, 28 * GIB, 0, "", "", why, sizeof(why)) == -ENOMEM &&
		   strstr(why, "23.5G of RAM, 4G of swap") && strstr(why, "give --memory 27G"),
		   "28G with swap: %s", why);
}

int main(void)
{
	test_sizes();
	test_rates();
	test_durations();
	test_ints();
	test_codecs();
	test_params();
	test_value_names();
	test_fmt();
	test_hostmem();
	TEST_EXIT();
}
