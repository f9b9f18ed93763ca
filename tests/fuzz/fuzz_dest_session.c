/* SPDX-License-Identifier: MIT */
/*
 * A whole destination session (admission, control loop, a data channel,
 * handover) fed by a hostile source over a unix socket. The harness opens
 * with a valid HELLO (flags and codec from input bytes 0 and 1) and
 * CHAN_HELLO, so that the stream reaches every state; then the input is a
 * list of frames: { u8 conn (bit 0: data, bit 7: wrong CRC), u8 type,
 * le16 length, payload }, framed with the right sequence numbers (and
 * CRC unless asked). Guest RAM is 1 MiB between inaccessible pages.
 * Invariants: the session ends once the source's connections close; RAM
 * is never written outside its block; the VM resumes at most once, and
 * only after a GO frame was sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "fuzz.h"
#include "net/io.h"
#include "test_vm.h"
#include "util/crc32c.h"
#include "wire/frame.h"
#include "wire/msg.h"

#define RAM_BYTES (1u << 20)

static struct test_ram ram;
static struct gw_vm_info vm;
static char path[96], url[120];
static const uint8_t mig_id[GW_WIRE_ID_BYTES] = "fuzz-migration!";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	fuzz_check(!test_ram_create(&ram, "fuzz-dst", RAM_BYTES, 4096), "RAM");
	test_vm_info_one(&vm, &ram, "ram0");
	snprintf(path, sizeof(path), "/tmp/gw-fuzz-session.%d.sock", (int)getpid());
	snprintf(url, sizeof(url), "unix:%s", path);
	return 0;
}

static int dial(struct gw_conn *c)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	gw_conn_init(c, fd);
	gw_conn_set_timeout(c, 2000);
	return 0;
}

/* Send @type (valid or not) with @payload; a wrong CRC when asked. 0 or -errno. */
static int send_frame(struct gw_conn *c, uint16_t type, const uint8_t *payload, uint32_t len, bool bad_crc)
{
	uint8_t hdr[GW_WIRE_HDR_BYTES];
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)payload, len } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	uint32_t crc;

	if (!bad_crc && type >= 1 && type <= GW_MSG__MAX && len <= gw_frame_max_payload(type)) {
		struct iovec p = { (void *)payload, len };

		return gw_conn_send(c, type, &p, len ? 1 : 0, NULL, 0);
	}
	gw_frame_hdr_encode(hdr, type, len, c->send_seq++);
	crc = gw_crc32c(gw_crc32c(0, hdr, sizeof(hdr)), payload, len);
	gw_frame_hdr_set_crc(hdr, crc ^ (bad_crc ? 0x80 : 0));
	return sendmsg(c->fd, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* HELLO, HELLO_ACK, CHAN_HELLO, CHAN_ACK. 0 or -1. */
static int open_migration(struct gw_conn *ctl, struct gw_conn *data, uint8_t flags, uint8_t codec)
{
	struct gw_msg_hello h = { .min_version = GW_WIRE_VERSION, .max_version = GW_WIRE_VERSION, .page_size_bytes = 4096,
				  .nr_channels = 1, .batch_pages = 128, .nr_blocks = 1 };
	struct gw_msg_chan_hello ch = { .index = 0 };
	uint8_t buf[256];
	union gw_msg m;

	memcpy(h.id, mig_id, sizeof(h.id));
	memcpy(ch.id, mig_id, sizeof(ch.id));
	h.flags = flags & (GW_HELLO_VERIFY | GW_HELLO_XBZRLE);
	h.codec = codec % (GW_WIRE_CODEC__MAX + 1);
	snprintf(h.blocks[0].name, sizeof(h.blocks[0].name), "ram0");
	h.blocks[0].size_bytes = RAM_BYTES;
	h.blocks[0].page_size_bytes = 4096;
	if (dial(ctl) || gw_conn_send_msg(ctl, GW_MSG_HELLO, &h) ||
	    gw_conn_recv_msg(ctl, &m, buf, sizeof(buf), NULL, 0) != GW_MSG_HELLO_ACK)
		return -1;
	memcpy(ch.challenge, m.hello_ack.challenge, sizeof(ch.challenge));
	if (dial(data) || gw_conn_send_msg(data, GW_MSG_CHAN_HELLO, &ch) ||
	    gw_conn_recv_msg(data, &m, buf, sizeof(buf), NULL, 0) != GW_MSG_CHAN_ACK)
		return -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct test_vm tvm;
	struct gw_session *s;
	struct gw_conn ctl, dat;
	bool sent_go = false;
	size_t at = 2;

	if (size < 2)
		return 0;
	memset(&tvm, 0, sizeof(tvm));
	memset(ram.host, 0, RAM_BYTES);	/* a destination's RAM starts zero */
	s = gw_session_new(GW_ROLE_DEST, &vm, &test_vm_ops, &tvm);
	fuzz_check(s != NULL, "session");
	gw_session_set(s, GW_PARAM_IO_TIMEOUT_MS, 500);
	fuzz_check(gw_incoming_start(s, url) == 0, "listen");
	gw_conn_init(&ctl, -1);
	gw_conn_init(&dat, -1);
	if (!open_migration(&ctl, &dat, data[0], data[1])) {
		while (at + 4 <= size) {
			uint8_t c = data[at];
			uint16_t type = data[at + 1];
			uint32_t len = (uint32_t)data[at + 2] | (uint32_t)data[at + 3] << 8;

			at += 4;
			if (len > size - at)
				len = (uint32_t)(size - at);
			if (send_frame(c & 1 ? &dat : &ctl, type, data + at, len, c & 0x80))
				break;
			sent_go |= !(c & 1) && type == GW_MSG_GO;
			at += len;
		}
	}
	/* End of input: the destination reads what was sent, then EOF (it may still answer). */
	if (ctl.fd >= 0)
		shutdown(ctl.fd, SHUT_WR);
	if (dat.fd >= 0)
		shutdown(dat.fd, SHUT_WR);
	gw_session_wait(s);
	gw_conn_close(&ctl);
	gw_conn_close(&dat);
	gw_session_free(s);
	fuzz_check(test_ram_guards_intact(&ram), "RAM guards intact");
	fuzz_check(test_vm_load(&tvm.resume_calls) <= 1, "resumed at most once");
	fuzz_check(!test_vm_load(&tvm.resume_calls) || sent_go, "resumed only after GO");
	return 0;
}
