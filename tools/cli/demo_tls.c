/* SPDX-License-Identifier: MIT */
/*
 * A test CA and certificates for both ends, made with the openssl command
 * into one directory in QEMU's x509 layout (the destination's and the
 * source's files side by side): `godwit tls-certs DIR` and `godwit demo
 * --tls` (throw-away, in the demo's private directory). The CA's key is
 * deleted once both certificates are signed: nothing else can be signed
 * with it.
 */
#include "cli/demo.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Run openssl with @argv (NULL-terminated), its output discarded. 0 or -1 with @err. */
static int openssl_run(char *const argv[], char *err, size_t err_len)
{
	posix_spawn_file_actions_t fa;
	int status = 0, ret;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	ret = posix_spawnp(&pid, "openssl", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (ret) {
		snprintf(err, err_len, "cannot run openssl: %s (install the openssl package)", strerror(ret));
		return -1;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(err, err_len, "openssl %s %s failed", argv[1], argv[2] ? argv[2] : "");
		return -1;
	}
	return 0;
}

/* DIR/NAME into @buf. */
static char *path(char *buf, size_t len, const char *dir, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
	return buf;
}

/* A key and a certificate @role-{key,cert}.pem for @cn with @san, signed by the CA in @dir. */
static int leaf(const char *dir, const char *role, const char *cn, const char *san, const char *days,
		char *err, size_t err_len)
{
	char key[PATH_MAX], csr[PATH_MAX], cert[PATH_MAX], ext[PATH_MAX], ca[PATH_MAX], cakey[PATH_MAX];
	char subj[160], kname[32], cname[32], ename[32];
	FILE *f;
	int ret;

	snprintf(kname, sizeof(kname), "%s-key.pem", role);
	snprintf(cname, sizeof(cname), "%s-cert.pem", role);
	snprintf(ename, sizeof(ename), "%s.ext", role);
	snprintf(subj, sizeof(subj), "/CN=%s", cn);
	path(key, sizeof(key), dir, kname);
	path(cert, sizeof(cert), dir, cname);
	path(csr, sizeof(csr), dir, "leaf.csr");
	path(ext, sizeof(ext), dir, ename);
	path(ca, sizeof(ca), dir, "ca-cert.pem");
	path(cakey, sizeof(cakey), dir, "ca-key.pem");
	f = fopen(ext, "we");
	if (!f || fprintf(f, "basicConstraints=CA:FALSE\nsubjectAltName=%s\n", san) < 0 || fclose(f)) {
		snprintf(err, err_len, "cannot write %s", ext);
		return -1;
	}
	{
		char *req[] = { "openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
				"-nodes", "-keyout", key, "-out", csr, "-subj", subj, NULL };
		char *sign[] = { "openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey,
				 "-CAcreateserial", "-days", (char *)days, "-extfile", ext, "-out", cert, NULL };

		ret = openssl_run(req, err, err_len);
		if (!ret)
			ret = openssl_run(sign, err, err_len);
	}
	unlink(csr);
	unlink(ext);
	return ret;
}

int tls_certs_make(const struct tls_certs_spec *sp, char *err, size_t err_len)
{
	char ca[PATH_MAX], cakey[PATH_MAX], serial[PATH_MAX], subj[160], san[TLS_CERTS_SAN_MAX + 16];
	char *req[] = { "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
			"-nodes", "-keyout", path(cakey, sizeof(cakey), sp->dir, "ca-key.pem"),
			"-out", path(ca, sizeof(ca), sp->dir, "ca-cert.pem"), "-days", (char *)sp->days,
			"-subj", subj, NULL };
	int ret;

	snprintf(subj, sizeof(subj), "/CN=%s", sp->ca_cn);
	snprintf(san, sizeof(san), "DNS:%s", sp->client_cn);
	if (mkdir(sp->dir, 0700) && errno != EEXIST) {
		snprintf(err, err_len, "cannot create %s: %s", sp->dir, strerror(errno));
		return -1;
	}
	ret = openssl_run(req, err, err_len);
	if (!ret)
		ret = leaf(sp->dir, "server", sp->server_cn, sp->server_san, sp->days, err, err_len);
	if (!ret)
		ret = leaf(sp->dir, "client", sp->client_cn, san, sp->days, err, err_len);
	/* Nothing is ever signed with it again. */
	unlink(cakey);
	unlink(path(serial, sizeof(serial), sp->dir, "ca-cert.srl"));
	return ret;
}

int demo_tls_creds(const char *dir, char *err, size_t err_len)
{
	const struct tls_certs_spec sp = {
		.dir = dir, .days = "1", .ca_cn = "godwit demo CA (throw-away)", .server_cn = "localhost",
		.server_san = TLS_CERTS_LOCAL_SAN, .client_cn = "godwit-demo-source",
	};

	return tls_certs_make(&sp, err, err_len);
}

void demo_tls_remove(const char *dir)
{
	static const char *const files[] = { "ca-cert.pem", "server-cert.pem", "server-key.pem",
					     "client-cert.pem", "client-key.pem", "ca-key.pem", "ca-cert.srl",
					     "leaf.csr", "server.ext", "client.ext" };
	char p[PATH_MAX];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink(path(p, sizeof(p), dir, files[i]));
	rmdir(dir);
}
