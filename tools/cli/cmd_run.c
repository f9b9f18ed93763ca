/* SPDX-License-Identifier: MIT */
/*
 * godwit run: one VM and its API socket.
 *
 * Source mode: the VM runs; "migrate" over the API (run_api.c) starts a
 * source session and a watcher thread that waits for its end (run_watch.c).
 *
 * Destination mode (--incoming URL): the VM waits for one migration; the
 * bound URL is printed as "incoming <url>" on stdout as soon as the socket
 * listens. With --incoming defer it listens when asked (API "incoming",
 * QMP migrate-incoming), and prints the same line then.
 *
 * --qmp PATH serves QEMU's Machine Protocol beside (or instead of) the
 * godwit API (qmp_cmds.c).
 *
 * The VM's backend comes from the table of vmm.h: --accel NAME takes that
 * backend if it probes, --accel auto the first that probes; each one
 * skipped is logged with its reason.
 *
 * Threads: see run/run.h.
 */
#include "cli/cli.h"
#include "run/run.h"
#include "run/run_events.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void run_usage(FILE *out)
{
	char names[64];

	run_backend_names(names, sizeof(names), ", ");
	fprintf(out,
		"usage: godwit run [OPTIONS]\n"
		"Run a VM and serve its API socket until 'quit', SIGINT or SIGTERM.\n"
		"\n"
		"  --memory SIZE          guest RAM (default 1G; a destination takes the source's\n"
		"                         layout unless given); at most this host's RAM and swap, and\n"
		"                         what it has available with --prealloc or a --fill\n"
		"  --vcpus N              vCPUs, 1..64 (default 1); a KVM destination (--incoming)\n"
		"                         makes them ahead, outside the downtime, and refuses a source\n"
		"                         with fewer at HELLO: give the source's count\n"
		"  --accel kvm|soft|auto  backend (default auto = the first usable of: %s\n"
		"                         that runs the workload)\n"
		"  --workload SPEC        idle | dirty:ws=SIZE,pattern=page|byte,rate=N | verify[:ws=SIZE,rate=N]\n"
		"                         | balloon[:ws=SIZE,keep=SIZE,window=PAGES,rate=N]\n"
		"                         | l2fwd[:dst0=MAC,dst1=MAC,budget=N] | echo  (these two\n"
		"                         need --nic)\n"
		"                         (default idle; --workload, --fill, --seed: a source's only)\n"
		"  --fill zero|mix|random|text|none   RAM content prepared on the host (default none)\n"
		"  --seed N               content and workload seed (default 1)\n"
		"  --memory-file PATH     map RAM from this file (default: a memfd)\n"
		"  --dirty-track auto|kvm-ring|kvm-log|uffd-wp   dirty tracking of this VM's migrations\n"
		"                         (default auto: kvm-log on KVM, uffd-wp on the soft VM; KVM\n"
		"                         creates its dirty ring only for kvm-ring)\n"
		"  --prealloc             allocate and zero all RAM at start, like QEMU's -mem-prealloc\n"
		"                         (default off; a destination given --memory is then ready\n"
		"                         before migrating)\n"
		"  --nic tap=IFNAME[,mac=MAC]   a virtio-net NIC on this host's tap IFNAME (repeatable,\n"
		"                         up to 4; default: none, MAC 52:54:00 and a hash of the NIC's\n"
		"                         name); a destination opens its own taps: give it as many\n"
		"  --api PATH             serve the godwit control socket here (default: none; docs/api.md)\n"
		"  --qmp PATH             serve a QMP (QEMU Machine Protocol) socket here (default: none;\n"
		"                         docs/qmp.md)\n"
		"  --incoming URL|defer   be a destination: listen on URL (tcp:HOST:PORT, port 0 = any;\n"
		"                         unix:PATH) and print 'incoming <bound-url>' on stdout; 'defer'\n"
		"                         waits for the URL from the API (incoming) or QMP (migrate-incoming)\n"
		"  --set PARAM=VALUE      migration parameter for this VM's sessions (repeatable; godwit's\n"
		"                         names or QEMU's, e.g. downtime-limit=300 in ms)\n"
		"  --tls-creds DIR        mutual TLS 1.3 with QEMU's x509 layout (ca-cert.pem,\n"
		"                         server-cert.pem, server-key.pem, client-cert.pem, client-key.pem)\n"
		"                         (default: none, plain)\n"
		"  --tls-psk FILE         TLS 1.3 with pre-shared keys (QEMU's keys.psk: IDENTITY:HEXKEY)\n"
		"                         (default: none)\n"
		"  --tls-authz NAME[,NAME] destination: client certificate names (CN or DNS) or PSK\n"
		"                         identities accepted (default: any the CA or the keys authenticate)\n"
		"  --tls-hostname NAME    source: the name the destination's certificate must carry\n"
		"                         (default: the URL's host)\n"
		"  --max-memory SIZE      destination without --memory: refuse a source with more RAM\n"
		"                         (default: this host's MemAvailable when it listens)\n"
		"  --log-level error|warn|info|debug   (default info)\n"
		"  --exit-after-migrate   exit once a migration ended: 0 completed, 1 otherwise\n"
		"                         (default: keep serving)\n"
		"\n"
		"Everything is checked before anything is made. Exit status: 0 after quit or a signal\n"
		"(an idle destination: 'no migration received'), 1 when the VM cannot start here\n"
		"(a --memory this host cannot hold, a backend not usable) or an incoming migration\n"
		"failed, 2 bad usage (a bad URL or workload, an option given twice, ...).\n"
		"\n", names);
	cli_print_params(out);
}

static int set_log_level(const char *name)
{
	static const struct { const char *n; enum gw_log_level l; } levels[] = {
		{ "error", GW_LOG_ERROR }, { "warn", GW_LOG_WARN },
		{ "info", GW_LOG_INFO }, { "debug", GW_LOG_DEBUG },
	};
	size_t i;

	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		if (!strcmp(levels[i].n, name)) {
			gw_log_set_level(levels[i].l);
			return 0;
		}
	}
	return -EINVAL;
}

/* The command line into @o. -1 to go on, else the exit code (help, bad usage). */
static int parse_args(int argc, char **argv, struct run_opts *o)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		CLI_RUN_VM_OPTS,
		CLI_RUN_TLS_OPTS,
		{ "api", required_argument, NULL, OPT_API },
		{ "qmp", required_argument, NULL, OPT_QMP },
		{ "incoming", required_argument, NULL, OPT_INCOMING },
		{ "set", required_argument, NULL, OPT_SET },
		{ "nic", required_argument, NULL, OPT_NIC },
		{ "exit-after-migrate", no_argument, NULL, OPT_EXIT_AFTER_MIGRATE },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	run_opts_init(o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == OPT_HELP) {
			run_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':') {
			cli_bad_option("run", c, argv);
			return CLI_EXIT_USAGE;
		}
		if (run_opt_apply(o, c, optarg, "run"))
			return CLI_EXIT_USAGE;
	}
	if (optind < argc) {
		cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	return run_opts_check_nics(o, "run") ? CLI_EXIT_USAGE : -1;
}

/* Before any thread exists, so that every thread inherits the mask. */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The VM of @cfg into rs->vm. 0, or -1 printed. */
static int create_vm(struct run_state *rs, const struct vmm_config *cfg)
{
	char err[256] = "";

	rs->vm = rs->be->create(cfg, err, sizeof(err));
	if (!rs->vm) {
		cli_error("cannot create the VM: %s", err[0] ? err : strerror(errno));
		return -1;
	}
	return 0;
}

/* A source starts its VM; a destination makes its session. 0, or -1 with the error printed. */
static int start_role(struct run_state *rs)
{
	char err[RUN_ERR_MAX];
	int ret;

	if (!rs->dest) {
		ret = rs->be->start(rs->vm);
		if (ret)
			cli_error("cannot start the VM: %s", strerror(-ret));
		return ret ? -1 : 0;
	}
	if (rs->defer)
		return 0;	/* the session comes with the URL */
	rs->sess = gw_session_new(GW_ROLE_DEST, rs->be->info(rs->vm), rs->be->engine_ops, rs->vm);
	if (!rs->sess) {
		cli_error("cannot create the destination session: %s", strerror(errno));
		return -1;
	}
	rs->sess_role = GW_ROLE_DEST;
	if (run_session_prepare(rs, rs->sess, &rs->base, err, sizeof(err))) {
		cli_error("destination session: %s", err);
		return -1;
	}
	if (run_dest_memory_cap(rs, rs->sess, err, sizeof(err))) {
		cli_error("%s", err);
		return -1;
	}
	return 0;
}

/* Destination: listen, say where, watch. 0, or -1 with the error printed. */
static int listen_incoming(struct run_state *rs, const char *url)
{
	int ret = gw_incoming_start(rs->sess, url);
	char why[512];

	if (ret) {
		gw_session_error(rs->sess, why, sizeof(why));
		if (why[0] && strstr(why, url))	/* the reason names the URL already */
			cli_error("cannot listen: %s", why);
		else
			cli_error("cannot listen on %s: %s", url, why[0] ? why : strerror(-ret));
		return -1;
	}
	printf("incoming %s\n", gw_incoming_url(rs->sess));
	fflush(stdout);
	pthread_mutex_lock(&rs->lock);
	__atomic_store_n(&rs->migrating, true, __ATOMIC_RELEASE);
	ret = run_watcher_start(rs);
	if (ret)
		__atomic_store_n(&rs->migrating, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rs->lock);
	if (ret) {
		cli_error("cannot start the watcher thread: %s", strerror(-ret));
		return -1;
	}
	return 0;
}

/* Until quit, SIGINT or SIGTERM; the exit code asked for. */
static int wait_for_quit(struct run_state *rs, const sigset_t *sigs)
{
	int sig, ret;

	for (;;) {
		sig = sigwaitinfo(sigs, NULL);
		if (sig >= 0 || errno != EINTR)
			break;
	}
	gw_log(GW_LOG_INFO, "cli", "shutdown", "by=%s", sig == SIGUSR1 ? "quit" : sig == SIGINT ? "SIGINT" : "SIGTERM");
	pthread_mutex_lock(&rs->lock);
	ret = rs->exit_code;
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* No API thread now: main alone touches rs->sess. The exit code, from @ret. */
static int end_session(struct run_state *rs, int ret)
{
	pthread_mutex_lock(&rs->lock);
	/* After the postcopy switch a cancel is refused: quitting abandons the migration. */
	if (rs->migrating && rs->sess)
		gw_session_abandon(rs->sess);
	pthread_mutex_unlock(&rs->lock);
	if (rs->watcher_started)
		pthread_join(rs->watcher, NULL);
	/* The watcher may have set it (a failed incoming migration). */
	pthread_mutex_lock(&rs->lock);
	if (ret == CLI_EXIT_OK)
		ret = rs->exit_code;
	pthread_mutex_unlock(&rs->lock);
	if (ret == CLI_EXIT_OK && rs->dest && rs->defer && !rs->sess)
		fprintf(stderr, "godwit: no migration received\n");
	if (rs->sess && rs->sess_role == GW_ROLE_SOURCE)
		rs->be->set_session(rs->vm, NULL);	/* no device report reaches it any more */
	gw_session_free(rs->sess);
	return ret;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	struct run_state rs;
	struct vmm_config cfg;
	struct api_server *api = NULL;
	struct run_qmp *qmp = NULL;
	sigset_t sigs;
	char err[256], spec[VMM_WORKLOAD_SPEC_MAX];
	int ret;

	ret = parse_args(argc, argv, &o);
	if (ret >= 0)
		return ret;
	memset(&rs, 0, sizeof(rs));
	gw_log_set_side(o.incoming_url ? "dst" : "src");
	set_log_level(o.log_level ? o.log_level : "info");	/* the library's own default is warn */
	ret = run_check(&o, o.incoming_url != NULL, &cfg, &rs.be);
	if (ret >= 0)
		return ret;
	block_signals(&sigs);
	pthread_mutex_init(&rs.lock, NULL);
	rs.opts = &o;
	rs.dest = o.incoming_url != NULL;
	rs.defer = rs.dest && !strcmp(o.incoming_url, "defer");
	rs.exit_on_error = true;
	rs.base = o.params;
	rs.qemu = (struct run_qemu_caps){ .events = false, .xbzrle_cache_bytes = 64ll << 20,
					  .multifd_channels = 2, .dirty_limit_bps = 1ll << 20 };
	rs.events = run_events_new();
	if (!rs.events) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	ret = CLI_EXIT_FAIL;
	if (create_vm(&rs, &cfg)) {
		run_events_free(rs.events);
		return CLI_EXIT_FAIL;
	}

	if (start_role(&rs))
		goto out_vm;
	if (o.api_path) {
		api = api_server_start(o.api_path, run_api_handler, &rs, err, sizeof(err));
		if (!api) {
			cli_error("API: %s", err);
			goto out_sess;
		}
		gw_log(GW_LOG_INFO, "cli", "api_listen", "path=%s", o.api_path);
	}
	if (o.qmp_path) {
		qmp = run_qmp_start(&rs, o.qmp_path, err, sizeof(err));
		if (!qmp) {
			cli_error("QMP: %s", err);
			goto out_api;
		}
		gw_log(GW_LOG_INFO, "cli", "qmp_listen", "path=%s", o.qmp_path);
	}
	if (rs.dest && !rs.defer && listen_incoming(&rs, o.incoming_url))
		goto out_api;
	rs.be->workload(rs.vm, spec, sizeof(spec));
	gw_log(GW_LOG_INFO, "cli", "vm_ready", "vm=%s memory_bytes=%" PRIu64 " vcpus=%u fill=%s workload=%s",
	       run_vm_status(&rs), cfg.memory_bytes, cfg.nr_vcpus, vmm_fill_name(cfg.fill), spec);
	ret = wait_for_quit(&rs, &sigs);
out_api:
	run_qmp_stop(&rs, qmp);
	api_server_stop(api);
out_sess:
	ret = end_session(&rs, ret);
out_vm:
	rs.be->destroy(rs.vm);
	run_events_free(rs.events);
	pthread_mutex_destroy(&rs.lock);
	return ret;
}
