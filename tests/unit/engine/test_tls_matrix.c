/* SPDX-License-Identifier: MIT */
/*
 * Invariant (the TLS matrix): a source and a destination whose TLS
 * credentials agree migrate, over tcp (IPv4, a host name, IPv6) and unix,
 * with x509 or a pre-shared key, and both report who the peer is. Every
 * other pairing is refused during the opening, before the destination
 * reads a HELLO: a plain source to a TLS destination, a TLS source to a
 * plain one, a source without a certificate, with one from another CA,
 * expired, or not in --tls-authz, a destination certificate for another
 * name, expired or from another CA, a wrong pre-shared key or identity.
 * Then both sides say why in words (the source in its error, the
 * destination in a log line), the destination's RAM is untouched (all
 * zero, nothing loaded or resumed), and a destination whose own
 * credentials are fine keeps waiting: a good source migrates to it next.
 *
 * A self-signed client certificate whose CN holds a quote, a newline, a
 * fake mig_done line and an escape code is refused like any stranger, and
 * its CN reaches the log escaped: no line of either side holds a control
 * byte.
 *
 * Certificates are made at test time by tests/tls/gen-certs.sh (argv[1]).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "test_util.h"
#include "test_vm.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (16u << 20)

static char certs[256];

/* Log lines of each side, to find the destination's reasons. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char dst_log[1 << 16];		/* log_lock */
static size_t dst_log_len;		/* log_lock */
static unsigned raw_lines;		/* log_lock: lines with a control byte (none may have one) */

static void sink(void *opaque, enum gw_log_level level, const char *line)
{
	size_t n = strlen(line);

	(void)opaque;
	if (getenv("GW_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", line);
	for (const unsigned char *p = (const unsigned char *)line; *p; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			pthread_mutex_lock(&log_lock);
			raw_lines++;
			pthread_mutex_unlock(&log_lock);
			break;
		}
	}
	if (level > GW_LOG_WARN || !strstr(line, " dst "))
		return;
	pthread_mutex_lock(&log_lock);
	if (dst_log_len + n + 2 < sizeof(dst_log)) {
		memcpy(dst_log + dst_log_len, line, n);
		dst_log_len += n;
		dst_log[dst_log_len++] = '\n';
		dst_log[dst_log_len] = 0;
	}
	pthread_mutex_unlock(&log_lock);
}

static bool dst_log_has(const char *words)
{
	bool found;

	pthread_mutex_lock(&log_lock);
	found = strstr(dst_log, words) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static void dst_log_clear(void)
{
	pthread_mutex_lock(&log_lock);
	dst_log_len = 0;
	dst_log[0] = 0;
	pthread_mutex_unlock(&log_lock);
}

/* TLS settings of one side: creds sub-directory or PSK file (relative to certs), names. */
struct side {
	const char *creds, *psk, *hostname, *authz;
};

struct tcase {
	const char *name;
	const char *url;		/* "tcp:127.0.0.1:0", "tcp:localhost:0", "tcp:[::1]:0", "unix" */
	struct side dst, src;
	const char *src_says;		/* NULL: completes; else words of the source's error */
	const char *dst_says;		/* words of the destination's log */
	bool dst_fine;			/* the destination's own credentials are good: a good source follows */
};

static void set_side(struct gw_session *s, const struct side *sd)
{
	char path[512];

	if (sd->creds) {
		snprintf(path, sizeof(path), "%s/%s", certs, sd->creds);
		TEST_ASSERT(gw_session_set_str(s, GW_SPARAM_TLS_CREDS, path) == 0, "tls-creds");
	}
	if (sd->psk) {
		snprintf(path, sizeof(path), "%s/%s", certs, sd->psk);
		TEST_ASSERT(gw_session_set_str(s, GW_SPARAM_TLS_PSK, path) == 0, "tls-psk");
	}
	if (sd->hostname)
		TEST_ASSERT(gw_session_set_str(s, GW_SPARAM_TLS_HOSTNAME, sd->hostname) == 0, "tls-hostname");
	if (sd->authz)
		TEST_ASSERT(gw_session_set_str(s, GW_SPARAM_TLS_AUTHZ, sd->authz) == 0, "tls-authz");
}

struct src {
	struct test_ram ram;
	struct test_vm vm;
	struct gw_session *s;
};

/* A source with @sd migrates to @url; returns its outcome, the error in @err. */
static int migrate(const struct side *sd, const char *url, struct gw_stats *st)
{
	struct src *p = calloc(1, sizeof(*p));
	struct gw_vm_info vm;
	int ret;

	TEST_ASSERT(p && test_ram_create(&p->ram, "tls-src", RAM_BYTES, 0) == 0, "source RAM");
	for (size_t i = 0; i < RAM_BYTES; i += 4096 * 7)
		p->ram.host[i] = (uint8_t)(i >> 12 | 1);
	test_vm_info_one(&vm, &p->ram, "ram0");
	p->s = gw_session_new(GW_ROLE_SOURCE, &vm, &test_vm_ops, &p->vm);
	TEST_ASSERT(p->s, "source session");
	TEST_ASSERT(gw_session_set(p->s, GW_PARAM_IO_TIMEOUT_MS, 5000) == 0, "timeout");
	TEST_ASSERT(gw_session_set(p->s, GW_PARAM_CHANNELS, 2) == 0, "channels");
	set_side(p->s, sd);
	ret = gw_migrate_start(p->s, url);
	if (!ret)
		ret = gw_session_wait(p->s);
	st->size = sizeof(*st);
	gw_session_stats(p->s, st);
	if (!st->error[0])
		gw_session_error(p->s, st->error, sizeof(st->error));
	TEST_CHECK(test_vm_load(&p->vm.pause_calls) == test_vm_load(&p->vm.resume_calls) || !ret,
		   "source VM paused and not resumed after a failure");
	gw_session_free(p->s);
	test_ram_destroy(&p->ram);
	free(p);
	return ret;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	return p[0] == 0 && !memcmp(p, p + 1, n - 1);
}

static void run_case(const struct tcase *c)
{
	static const struct side good_src = { .creds = "src-ok" };
	struct test_ram ram;
	struct test_vm tvm = { 0 };
	struct gw_vm_info vm;
	struct gw_session *d;
	struct gw_stats st = { .size = sizeof(st) }, ds = { .size = sizeof(ds) };
	char url[200], bound[200], upath[160];
	int ret;

	dst_log_clear();
	TEST_ASSERT(test_ram_create(&ram, "tls-dst", RAM_BYTES, 0) == 0, "destination RAM");
	test_vm_info_one(&vm, &ram, "ram0");
	d = gw_session_new(GW_ROLE_DEST, &vm, &test_vm_ops, &tvm);
	TEST_ASSERT(d, "destination session");
	TEST_ASSERT(gw_session_set(d, GW_PARAM_IO_TIMEOUT_MS, 5000) == 0, "timeout");
	set_side(d, &c->dst);
	if (!strcmp(c->url, "unix")) {
		snprintf(upath, sizeof(upath), "/tmp/gw-tls-%d.sock", (int)getpid());
		snprintf(url, sizeof(url), "unix:%s", upath);
	} else {
		snprintf(url, sizeof(url), "%s", c->url);
	}
	ret = gw_incoming_start(d, url);
	if (ret && strstr(url, "::1")) {
		printf("%-26s skipped: no IPv6 loopback here\n", c->name);
		gw_session_free(d);
		test_ram_destroy(&ram);
		return;
	}
	TEST_ASSERT(ret == 0, "%s: listen on %s: %d", c->name, url, ret);
	snprintf(bound, sizeof(bound), "%s", gw_incoming_url(d));
	if (!strncmp(url, "tcp:localhost", 13))	/* keep the name: TLS checks it */
		snprintf(bound, sizeof(bound), "tcp:localhost:%s", strrchr(gw_incoming_url(d), ':') + 1);

	ret = migrate(&c->src, bound, &st);
	if (!c->src_says) {
		TEST_CHECK(ret == 0, "%s: migration failed: %s", c->name, st.error);
		TEST_CHECK(!strcmp(st.tls, c->src.psk ? "psk" : "x509"), "%s: source tls %s", c->name, st.tls);
		gw_session_wait(d);
		gw_session_stats(d, &ds);
		TEST_CHECK(ds.status == GW_STATUS_COMPLETED && ds.verified, "%s: destination %s", c->name,
			   gw_status_name(ds.status));
		printf("%-26s completed: source sees %s, destination sees %s (%s)\n", c->name, st.tls_peer,
		       ds.tls_peer, ds.tls_cipher);
		goto out;
	}
	TEST_CHECK(ret != 0, "%s: migrated, should have been refused", c->name);
	TEST_CHECK(strstr(st.error, c->src_says) != NULL, "%s: source says \"%s\", expected \"%s\"", c->name,
		   st.error, c->src_says);
	/* The destination's side of the story comes from its acceptor: wait for the line (30 s: a hang guard). */
	for (int i = 0; i < 3000 && !dst_log_has(c->dst_says); i++)
		usleep(10000);
	TEST_CHECK(dst_log_has(c->dst_says), "%s: destination never said \"%s\"; it logged:\n%s", c->name,
		   c->dst_says, dst_log);
	TEST_CHECK(all_zero(ram.host, RAM_BYTES), "%s: destination RAM touched", c->name);
	TEST_CHECK(!test_vm_load(&tvm.load_calls) && !test_vm_load(&tvm.resume_calls),
		   "%s: destination loaded or resumed", c->name);
	gw_session_stats(d, &ds);
	TEST_CHECK(ds.status != GW_STATUS_FAILED, "%s: the destination gave up: %s", c->name, ds.error);
	TEST_CHECK(ds.conns_refused >= 1, "%s: refusals counted %llu", c->name,
		   (unsigned long long)ds.conns_refused);
	printf("%-26s refused\n    source:      %s\n    destination: %s\n", c->name, st.error,
	       strstr(dst_log, c->dst_says) ? strstr(dst_log, c->dst_says) : "?");
	if (c->dst_fine) {
		/* The destination still waits for its source: it comes now. */
		ret = migrate(&good_src, bound, &st);
		TEST_CHECK(ret == 0, "%s: the good source after the refusal failed: %s", c->name, st.error);
	}
out:
	gw_session_free(d);
	test_ram_destroy(&ram);
}

static const struct tcase cases[] = {
	{ "x509 ipv4", "tcp:127.0.0.1:0", { .creds = "dst-ok" }, { .creds = "src-ok" }, NULL, NULL, false },
	{ "x509 host name", "tcp:localhost:0", { .creds = "dst-ok" }, { .creds = "src-ok" }, NULL, NULL, false },
	{ "x509 ipv6", "tcp:[::1]:0", { .creds = "dst-ok" }, { .creds = "src-ok" }, NULL, NULL, false },
	{ "x509 unix", "unix", { .creds = "dst-ok" }, { .creds = "src-ok", .hostname = "dst.test" },
	  NULL, NULL, false },
	{ "x509 authz", "tcp:127.0.0.1:0", { .creds = "dst-ok", .authz = "somebody,src.test" },
	  { .creds = "src-ok" }, NULL, NULL, false },
	{ "psk", "tcp:127.0.0.1:0", { .psk = "keys.psk" }, { .psk = "keys.psk" }, NULL, NULL, false },
	{ "plain source", "tcp:127.0.0.1:0", { .creds = "dst-ok" }, { NULL, NULL, NULL, NULL },
	  "requires TLS", "requires TLS", true },
	{ "plain destination", "tcp:127.0.0.1:0", { NULL, NULL, NULL, NULL }, { .creds = "src-ok" },
	  "answered without TLS", "does not use TLS", false },
	{ "no client certificate", "tcp:127.0.0.1:0", { .creds = "dst-ok" }, { .creds = "src-nocert" },
	  "requires a certificate", "presented no certificate", true },
	{ "client from another CA", "tcp:127.0.0.1:0", { .creds = "dst-ok" }, { .creds = "src-otherca" },
	  "does not trust the CA", "not signed by a CA in our ca-cert.pem", true },
	{ "client with a forged CN", "tcp:127.0.0.1:0", { .creds = "dst-ok" }, { .creds = "src-hostile" },
	  "does not trust the CA", "(CN=x\\\"\\x0aX mig_done status=completed\\x1b[31m) is not signed by a CA", true },
	{ "client expired", "tcp:127.0.0.1:0", { .creds = "dst-ok" }, { .creds = "src-expired" },
	  "client-cert.pem has expired", "expired on", true },
	{ "client not in authz", "tcp:127.0.0.1:0", { .creds = "dst-ok", .authz = "src.test" },
	  { .creds = "src-other" }, "not allowed by this destination's --tls-authz",
	  "not allowed by this destination's --tls-authz", true },
	{ "wrong host name", "tcp:127.0.0.1:0", { .creds = "dst-wronghost" }, { .creds = "src-ok" },
	  "not '127.0.0.1'", "refused the TLS session", false },
	{ "wrong --tls-hostname", "tcp:127.0.0.1:0", { .creds = "dst-ok" },
	  { .creds = "src-ok", .hostname = "elsewhere.test" }, "not 'elsewhere.test'",
	  "refused the TLS session", true },
	{ "server expired", "tcp:127.0.0.1:0", { .creds = "dst-expired" }, { .creds = "src-ok" },
	  "expired on", "our server-cert.pem has expired", false },
	{ "server from another CA", "tcp:127.0.0.1:0", { .creds = "dst-otherca" }, { .creds = "src-ok" },
	  "not signed by a CA in our ca-cert.pem", "does not trust the CA", false },
	{ "psk wrong key", "tcp:127.0.0.1:0", { .psk = "keys.psk" }, { .psk = "other.psk" },
	  "does not match", "does not match ours", false },
	{ "psk unknown identity", "tcp:127.0.0.1:0", { .psk = "keys.psk" }, { .psk = "unknown.psk" },
	  "does not match", "'stranger' is not in our --tls-psk file", false },
	{ "x509 source, psk destination", "tcp:127.0.0.1:0", { .psk = "keys.psk" }, { .creds = "src-ok" },
	  "", "the source offered no pre-shared key", false },
};

int main(int argc, char **argv)
{
	char cmd[512];

	if (argc < 2)
		test_skip("usage: test_tls_matrix tests/tls/gen-certs.sh");
	if (system("openssl version >/dev/null 2>&1"))
		test_skip("no openssl command to make certificates");
	snprintf(certs, sizeof(certs), "/tmp/gw-tls-matrix.%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "%s %s", argv[1], certs);
	TEST_ASSERT(system(cmd) == 0, "making certificates: %s", cmd);
	gw_log_set_sink(sink, NULL);
	gw_log_set_side("tst");
	test_time_bound(240);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (argc < 3 || strstr(cases[i].name, argv[2]))
			run_case(&cases[i]);
	TEST_CHECK(raw_lines == 0, "%u log lines with a control byte", raw_lines);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", certs);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", certs);
	TEST_EXIT();
}
