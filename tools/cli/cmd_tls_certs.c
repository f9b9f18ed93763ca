/* SPDX-License-Identifier: MIT */
/*
 * godwit tls-certs DIR: a test CA and the certificates of both ends in DIR,
 * QEMU's x509 layout, for --tls-creds (docs/security.md, "Making test
 * certificates"). A new CA each time: an existing credential is never
 * replaced.
 */
#include "cli/cli.h"
#include "cli/demo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define TLS_CERTS_DAYS_DEFAULT 30
#define TLS_CERTS_CLIENT_DEFAULT "godwit-source"

static void tls_certs_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit tls-certs DIR [--host NAME]... [--client-name NAME] [--days N]\n"
		"Make a test CA and certificates for mutual TLS in DIR (created 0700), in the layout\n"
		"the tls-creds parameter reads: ca-cert.pem, server-cert.pem and server-key.pem for the\n"
		"destination, client-cert.pem and client-key.pem for the source. The CA's key is deleted\n"
		"once both are signed. Copy DIR to both hosts (each needs only its own key).\n"
		"\n"
		"  --host NAME         a name or IP address of the destination, as the source's URL\n"
		"                      gives it (repeatable; default: localhost, 127.0.0.1 and ::1 only,\n"
		"                      which every certificate carries)\n"
		"  --client-name NAME  the source's certificate name, what the tls-authz parameter of\n"
		"                      the destination accepts\n"
		"                      (default " TLS_CERTS_CLIENT_DEFAULT ")\n"
		"  --days N            validity, 1..3650 days (default %d)\n"
		"\n"
		"Exit status: 0, 1 DIR holds credentials already or openssl failed, 2 bad usage.\n",
		TLS_CERTS_DAYS_DEFAULT);
}

/* A host or certificate name: letters, digits, '.', '-', ':' (IPv6), at most 253 bytes. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 253 && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					   "0123456789.-:") == n;
}

/* Append @host to the subjectAltName in @san as DNS: or IP:. 0, or -1 when it does not fit. */
static int san_add(char *san, size_t len, const char *host)
{
	unsigned char a[16];
	bool ip = inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
	size_t at = strlen(san);
	int n = snprintf(san + at, len - at, ",%s:%s", ip ? "IP" : "DNS", host);

	return n < 0 || (size_t)n >= len - at ? -1 : 0;
}

/* 0 when none of the files tls-certs writes is in @dir, else 1 with the error printed. */
static int dir_fresh(const char *dir)
{
	static const char *const files[] = { "ca-cert.pem", "server-cert.pem", "server-key.pem",
					     "client-cert.pem", "client-key.pem" };
	char p[PATH_MAX];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		if (access(p, F_OK) == 0) {
			cli_error("tls-certs: %s exists: a new CA would not match it; give an empty or new "
				  "directory", p);
			return 1;
		}
	}
	return 0;
}

static int tls_certs_run(struct tls_certs_spec *sp, const char *san, const char *first_host)
{
	char err[512];

	sp->server_san = san;
	sp->server_cn = first_host ? first_host : "localhost";
	if (dir_fresh(sp->dir))
		return CLI_EXIT_FAIL;
	if (tls_certs_make(sp, err, sizeof(err))) {
		cli_error("tls-certs: %s", err);
		return CLI_EXIT_FAIL;
	}
	printf("made a test CA and certificates in %s (valid %s days; the CA's key is deleted)\n"
	       "  destination: --tls-creds %s (ca-cert.pem, server-cert.pem, server-key.pem), names %s\n"
	       "  source:      --tls-creds %s (ca-cert.pem, client-cert.pem, client-key.pem), name %s"
	       " (the destination's --tls-authz %s)\n",
	       sp->dir, sp->days, sp->dir, san, sp->dir, sp->client_cn, sp->client_cn);
	return CLI_EXIT_OK;
}

int cmd_tls_certs(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		{ "host", required_argument, NULL, OPT_HOST },
		{ "client-name", required_argument, NULL, OPT_CLIENT_NAME },
		{ "days", required_argument, NULL, OPT_DAYS },
		{ NULL, 0, NULL, 0 },
	};
	struct tls_certs_spec sp = { .ca_cn = "godwit test CA", .client_cn = TLS_CERTS_CLIENT_DEFAULT };
	char san[TLS_CERTS_SAN_MAX] = TLS_CERTS_LOCAL_SAN, days[24];
	const char *first_host = NULL;
	int64_t d = TLS_CERTS_DAYS_DEFAULT;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			tls_certs_usage(stdout);
			return CLI_EXIT_OK;
		case OPT_HOST:
			if (!name_ok(optarg) || san_add(san, sizeof(san), optarg)) {
				cli_usage_error("tls-certs", "--host '%s': a DNS name or an IP address "
						"(letters, digits, '.', '-', ':')", optarg);
				return CLI_EXIT_USAGE;
			}
			first_host = first_host ? first_host : optarg;
			break;
		case OPT_CLIENT_NAME:
			if (!name_ok(optarg)) {
				cli_usage_error("tls-certs", "--client-name '%s': letters, digits, '.', '-' only",
						optarg);
				return CLI_EXIT_USAGE;
			}
			sp.client_cn = optarg;
			break;
		case OPT_DAYS:
			if (cli_parse_int(optarg, 1, 3650, &d)) {
				cli_usage_error("tls-certs", "--days: a number of days, 1..3650, not '%s'", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		default:
			cli_bad_option("tls-certs", c, argv);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind == argc) {
		cli_usage_error("tls-certs", "which directory? (godwit tls-certs DIR)");
		return CLI_EXIT_USAGE;
	}
	if (optind + 1 < argc) {
		cli_usage_error("tls-certs", "one DIR, not '%s' too", argv[optind + 1]);
		return CLI_EXIT_USAGE;
	}
	snprintf(days, sizeof(days), "%lld", (long long)d);
	sp.days = days;
	sp.dir = argv[optind];
	return tls_certs_run(&sp, san, first_host);
}
