/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a frame is accepted only when it is exactly what a godwit peer
 * sent. Header decoding rejects every malformed class with its own error
 * (bad magic and bad type/length -EPROTO, other version -EPROTONOSUPPORT);
 * a framed connection delivers sent frames intact and in order, and turns
 * every single-bit change of a frame on the wire into an error (-EBADMSG,
 * -EPROTO or -EPROTONOSUPPORT), never into a delivered frame; a wrong
 * sequence number is -EPROTO, a truncated frame -ECONNRESET, a payload over
 * the receiver's capacity -EPROTO. ERROR frames keep only printable ASCII
 * and bound their reason; wire error codes map to errno and back.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "util/crc32c.h"
#include "net/io.h"
#include "wire/frame.h"
#include "wire/msg.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

/* A complete frame in @out with a correct CRC; returns its length. */
static size_t raw_frame(uint8_t *out, uint16_t type, uint32_t flags, const void *payload,
			uint32_t len, uint32_t seq)
{
	uint32_t crc;

	gw_frame_hdr_encode(out, type, len, seq);
	gw_le32_put(out + 8, flags);
	memcpy(out + GW_WIRE_HDR_BYTES, payload, len);
	crc = gw_crc32c(0, out, GW_WIRE_HDR_BYTES + (size_t)len);
	gw_frame_hdr_set_crc(out, crc);
	return GW_WIRE_HDR_BYTES + (size_t)len;
}

/* One contiguous payload. */
static int send_buf(struct gw_conn *c, uint16_t type, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };

	return gw_conn_send(c, type, &iov, len ? 1 : 0, NULL, 0);
}

/* ERROR's payload in @buf; returns its length. */
static size_t error_encode(uint8_t *buf, size_t cap, uint32_t code, const char *reason)
{
	struct gw_msg_error m = { .code = code };
	struct gw_wbuf w;

	snprintf(m.reason, sizeof(m.reason), "%s", reason ? reason : "");
	gw_wbuf_init(&w, buf, cap);
	TEST_ASSERT(gw_msg_encode(GW_MSG_ERROR, &m, &w) == 0, "encode ERROR");
	return w.len;
}

static int error_decode(const void *buf, size_t len, struct gw_msg_error *m)
{
	return gw_msg_decode(GW_MSG_ERROR, buf, len, m, NULL, 0);
}

struct pair {
	struct gw_conn tx, rx;
};

static void pair_open(struct pair *p)
{
	int sv[2];

	TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	gw_conn_init(&p->tx, sv[0]);
	gw_conn_init(&p->rx, sv[1]);
	/* A bug that makes the receiver wait must fail, not hang. */
	TEST_ASSERT(gw_conn_set_timeout(&p->rx, 2000) == 0, "timeout");
}

static void pair_close(struct pair *p)
{
	gw_conn_close(&p->tx);
	gw_conn_close(&p->rx);
}

static void write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *b = buf;

	while (len) {
		ssize_t n = write(fd, b, len);

		TEST_ASSERT(n > 0, "write");
		b += n;
		len -= (size_t)n;
	}
}

static void test_hdr_codec(void)
{
	uint8_t hdr[GW_WIRE_HDR_BYTES];
	struct gw_frame_hdr h;

	for (uint16_t type = 1; type <= GW_MSG__MAX; type++) {
		uint32_t max = gw_frame_max_payload(type);

		/* v1 defines no header flags: any set bit is refused. */
		gw_frame_hdr_encode(hdr, type, max, 0xfffffffeu);
		gw_le32_put(hdr + 8, 0x5a5a0001u);
		TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTO, "type %u with flags", type);
		gw_frame_hdr_encode(hdr, type, max, 0xfffffffeu);
		gw_frame_hdr_set_crc(hdr, 0xdeadbeefu);
		TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == 0, "type %u", type);
		TEST_CHECK(h.version == GW_WIRE_VERSION && h.type == type && h.flags == 0 &&
			   h.len == max && h.seq == 0xfffffffeu && h.crc == 0xdeadbeefu,
			   "round trip of type %u", type);
		TEST_CHECK(strcmp(gw_frame_type_name(type), "UNKNOWN") != 0, "name of %u", type);
		/* One byte over the bound of the type. */
		gw_frame_hdr_encode(hdr, type, max + 1, 0);
		TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTO, "type %u len max+1", type);
	}
	/* Little-endian on the wire, magic "GWM1". */
	gw_frame_hdr_encode(hdr, GW_MSG_ROUND, 16, 7);
	TEST_CHECK(!memcmp(hdr, "GWM1", 4), "magic bytes");
	TEST_CHECK(hdr[4] == GW_WIRE_VERSION && hdr[5] == 0 && hdr[6] == GW_MSG_ROUND && hdr[7] == 0, "version/type LE");
	TEST_CHECK(hdr[12] == 16 && hdr[16] == 7, "len/seq LE");

	gw_frame_hdr_encode(hdr, GW_MSG_ROUND, 16, 0);
	hdr[0] ^= 1;
	TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTO, "bad magic");
	for (uint16_t v = 0; v < 4; v++) {
		if (v == GW_WIRE_VERSION)
			continue;
		gw_frame_hdr_encode(hdr, GW_MSG_ROUND, 16, 0);
		hdr[4] = (uint8_t)v;
		TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTONOSUPPORT, "version %u", v);
	}
	gw_frame_hdr_encode(hdr, GW_MSG_ROUND, 16, 0);
	hdr[5] = 1;	/* version 257 */
	TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTONOSUPPORT, "version 257");
	const uint16_t bad_types[] = { 0, GW_MSG__MAX + 1, 99, 0xffff };
	for (unsigned i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
		gw_frame_hdr_encode(hdr, bad_types[i], 0, 0);
		TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTO, "type %u", bad_types[i]);
		TEST_CHECK(gw_frame_max_payload(bad_types[i]) == 0, "max payload of type %u", bad_types[i]);
	}
	gw_frame_hdr_encode(hdr, GW_MSG_GO, 1, 0);
	TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTO, "GO with a payload");
	gw_frame_hdr_encode(hdr, GW_MSG_PAGES, 0xffffffffu, 0);
	TEST_CHECK(gw_frame_hdr_decode(hdr, &h) == -EPROTO, "4 GiB length");
}

static void test_conn_roundtrip(void)
{
	struct pair p;
	struct gw_frame_hdr h;
	uint8_t a[300], b[7], got[400];
	struct iovec iov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	ssize_t n;

	for (unsigned i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 7 + 1);
	memset(b, 0xee, sizeof(b));
	pair_open(&p);
	TEST_ASSERT(send_buf(&p.tx, GW_MSG_ROUND, a, 16) == 0, "send ROUND");
	TEST_ASSERT(gw_conn_send(&p.tx, GW_MSG_ERROR, iov, 2, NULL, 0) == 0, "send ERROR iov");
	TEST_ASSERT(send_buf(&p.tx, GW_MSG_GO, NULL, 0) == 0, "send GO");
	TEST_CHECK(send_buf(&p.tx, GW_MSG_GO, a, 1) == -EMSGSIZE, "sender refuses over-bound");

	n = gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL);
	TEST_CHECK(n == 16 && h.type == GW_MSG_ROUND && h.seq == 0 && !memcmp(got, a, 16), "ROUND: %zd", n);
	n = gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL);
	TEST_CHECK(n == (ssize_t)(sizeof(a) + sizeof(b)) && h.type == GW_MSG_ERROR && h.seq == 1 &&
		   !memcmp(got, a, sizeof(a)) && !memcmp(got + sizeof(a), b, sizeof(b)), "ERROR: %zd", n);
	n = gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL);
	TEST_CHECK(n == 0 && h.type == GW_MSG_GO && h.seq == 2, "GO: %zd", n);
	TEST_CHECK(p.tx.send_seq == 3 && p.rx.recv_seq == 3, "seqs %u %u", p.tx.send_seq, p.rx.recv_seq);
	TEST_CHECK(p.tx.bytes_sent == p.rx.bytes_recv, "byte counters %llu %llu",
		   (unsigned long long)p.tx.bytes_sent, (unsigned long long)p.rx.bytes_recv);
	pair_close(&p);
}

/*
 * Every single-bit flip anywhere in a frame (header or payload) is an
 * error. Padding after the frame lets a flip that grows the length read
 * bytes instead of waiting; the CRC then catches it.
 */
static void test_bit_flips(void)
{
	uint8_t payload[100], frame[GW_WIRE_HDR_BYTES + sizeof(payload)], pad[4096];
	size_t len;
	unsigned n_badmsg = 0, n_proto = 0, n_vers = 0;

	for (unsigned i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i ^ 0x3c);
	memset(pad, 0, sizeof(pad));
	len = raw_frame(frame, GW_MSG_ERROR, 0, payload, sizeof(payload), 0);
	for (size_t bit = 0; bit < len * 8; bit++) {
		struct pair p;
		struct gw_frame_hdr h;
		uint8_t got[8192];
		ssize_t n;

		pair_open(&p);
		frame[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		write_all(p.tx.fd, frame, len);
		write_all(p.tx.fd, pad, sizeof(pad));
		frame[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		shutdown(p.tx.fd, SHUT_WR);
		n = gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL);
		TEST_CHECK(n == -EBADMSG || n == -EPROTO || n == -EPROTONOSUPPORT,
			   "bit %zu (byte %zu) flipped: got %zd", bit, bit / 8, n);
		if (bit / 8 >= 6 && bit / 8 < 16)	/* type, flags, length */
			TEST_CHECK(n == -EBADMSG || n == -EPROTO, "header bit %zu: %zd", bit, n);
		if (bit / 8 >= 16 && bit / 8 < 20)
			TEST_CHECK(n == -EPROTO, "seq bit %zu: %zd", bit, n);
		if (bit / 8 >= GW_WIRE_HDR_BYTES || (bit / 8 >= 20 && bit / 8 < 24))
			TEST_CHECK(n == -EBADMSG, "crc/payload bit %zu: %zd", bit, n);
		n_badmsg += n == -EBADMSG;
		n_proto += n == -EPROTO;
		n_vers += n == -EPROTONOSUPPORT;
		pair_close(&p);
	}
	printf("bit flips: %zu bits, EBADMSG %u, EPROTO %u, EPROTONOSUPPORT %u\n",
	       len * 8, n_badmsg, n_proto, n_vers);
}

static void test_seq(void)
{
	uint8_t frame[64], got[64];
	struct gw_frame_hdr h;
	struct pair p;
	size_t len;

	/* First frame with seq 5. */
	pair_open(&p);
	len = raw_frame(frame, GW_MSG_ROUND, 0, "0123456789abcdef", 16, 5);
	write_all(p.tx.fd, frame, len);
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == -EPROTO, "seq 5 first");
	pair_close(&p);

	/* A replayed frame: seq 0 twice. */
	pair_open(&p);
	len = raw_frame(frame, GW_MSG_ROUND, 0, "0123456789abcdef", 16, 0);
	write_all(p.tx.fd, frame, len);
	write_all(p.tx.fd, frame, len);
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == 16, "seq 0");
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == -EPROTO, "seq 0 replayed");
	pair_close(&p);

	/* A skipped frame: 0 then 2. */
	pair_open(&p);
	len = raw_frame(frame, GW_MSG_ROUND, 0, "0123456789abcdef", 16, 0);
	write_all(p.tx.fd, frame, len);
	len = raw_frame(frame, GW_MSG_ROUND, 0, "0123456789abcdef", 16, 2);
	write_all(p.tx.fd, frame, len);
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == 16, "seq 0");
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == -EPROTO, "seq 2 after 0");
	pair_close(&p);
}

static void test_truncated(void)
{
	uint8_t frame[64], got[64];
	struct gw_frame_hdr h;
	size_t len = raw_frame(frame, GW_MSG_ROUND, 0, "0123456789abcdef", 16, 0);

	/* Cut at every length: the header, inside the payload, nothing. */
	for (size_t cut = 0; cut < len; cut++) {
		struct pair p;

		pair_open(&p);
		if (cut)
			write_all(p.tx.fd, frame, cut);
		shutdown(p.tx.fd, SHUT_WR);
		TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == -ECONNRESET,
			   "cut at %zu of %zu", cut, len);
		pair_close(&p);
	}
}

static void test_over_cap(void)
{
	uint8_t a[100] = { 0 }, got[64];
	struct gw_frame_hdr h;
	struct pair p;

	pair_open(&p);
	TEST_ASSERT(send_buf(&p.tx, GW_MSG_ERROR, a, sizeof(a)) == 0, "send");
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == -EPROTO, "payload > cap");
	pair_close(&p);
	/* Exactly the capacity is fine. */
	pair_open(&p);
	TEST_ASSERT(send_buf(&p.tx, GW_MSG_ERROR, a, sizeof(got)) == 0, "send");
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == (ssize_t)sizeof(got), "== cap");
	pair_close(&p);
}

static void test_silent_peer(void)
{
	uint8_t got[64];
	struct gw_frame_hdr h;
	struct pair p;

	pair_open(&p);
	TEST_ASSERT(gw_conn_set_timeout(&p.rx, 100) == 0, "timeout");
	TEST_CHECK(gw_conn_recv(&p.rx, &h, got, sizeof(got), NULL, 0, NULL) == -ETIMEDOUT, "silent peer");
	pair_close(&p);
}

static void test_error_msg(void)
{
	uint8_t buf[8 + GW_WIRE_MAX_REASON + 64];
	char reason[700];
	struct gw_msg_error m;
	size_t len;

	len = error_encode(buf, sizeof(buf), GW_WERR_LAYOUT, "block ram0: \x01\x7f\xff\n ok");
	TEST_CHECK(len == 6 + 19, "length %zu", len);
	TEST_CHECK(error_decode(buf, len, &m) == 0, "decode");
	TEST_CHECK(m.code == GW_WERR_LAYOUT, "code %u", m.code);
	TEST_CHECK(!strcmp(m.reason, "block ram0: ???? ok"), "reason \"%s\"", m.reason);

	/* Empty reason. */
	len = error_encode(buf, sizeof(buf), GW_WERR_PROTO, NULL);
	TEST_CHECK(error_decode(buf, len, &m) == 0 && m.reason[0] == 0, "empty reason");

	/* The encoder bounds the reason at GW_WIRE_MAX_REASON. */
	memset(reason, 'x', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = 0;
	len = error_encode(buf, sizeof(buf), GW_WERR_PROTO, reason);
	TEST_CHECK(len == 6 + GW_WIRE_MAX_REASON && len <= gw_frame_max_payload(GW_MSG_ERROR),
		   "long reason bounded: %zu", len);
	TEST_CHECK(error_decode(buf, len, &m) == 0 && strlen(m.reason) == GW_WIRE_MAX_REASON,
		   "max reason decodes");

	/* The decoder refuses a reason over the bound, truncation and trailing bytes. */
	gw_le16_put(buf + 4, GW_WIRE_MAX_REASON + 1);
	memset(buf + 6, 'y', GW_WIRE_MAX_REASON + 1);
	TEST_CHECK(error_decode(buf, 6 + GW_WIRE_MAX_REASON + 1, &m) == -EPROTO, "oversize reason");
	len = error_encode(buf, sizeof(buf), GW_WERR_PROTO, "abc");
	for (size_t cut = 0; cut < len; cut++)
		TEST_CHECK(error_decode(buf, cut, &m) == -EPROTO, "truncated at %zu", cut);
	TEST_CHECK(error_decode(buf, len + 1, &m) == -EPROTO, "trailing byte");

	/* gw_conn_send_error carries code and reason. */
	{
		struct pair p;
		struct gw_frame_hdr h;
		ssize_t n;

		pair_open(&p);
		TEST_ASSERT(gw_conn_send_error(&p.tx, -EUCLEAN, "bad zstd") == 0, "send_error");
		n = gw_conn_recv(&p.rx, &h, buf, sizeof(buf), NULL, 0, NULL);
		TEST_CHECK(n > 0 && h.type == GW_MSG_ERROR, "ERROR frame: %zd", n);
		TEST_CHECK(n > 0 && error_decode(buf, (size_t)n, &m) == 0 &&
			   m.code == GW_WERR_COMPRESS && !strcmp(m.reason, "bad zstd"), "send_error content");
		pair_close(&p);
	}
}

static void test_err_map(void)
{
	for (uint32_t code = GW_WERR_PROTO; code <= GW_WERR_COMPRESS; code++) {
		int e = gw_wire_err_to_errno(code);

		TEST_CHECK(e < 0, "code %u -> %d", code, e);
		TEST_CHECK(gw_wire_err_from_errno(e) == code, "code %u -> %d -> %u",
			   code, e, gw_wire_err_from_errno(e));
	}
	TEST_CHECK(gw_wire_err_to_errno(0) == -EPROTO, "code 0");
	TEST_CHECK(gw_wire_err_to_errno(GW_WERR_COMPRESS + 1) == -EPROTO, "code 14");
	TEST_CHECK(gw_wire_err_to_errno(0xffffffffu) == -EPROTO, "code 2^32-1");
	TEST_CHECK(gw_wire_err_from_errno(-ENOSPC) == GW_WERR_INTERNAL, "unlisted errno");
	TEST_CHECK(gw_wire_err_from_errno(-EINVAL) == GW_WERR_PROTO, "EINVAL");
	TEST_CHECK(gw_wire_err_from_errno(-EOPNOTSUPP) == GW_WERR_VERSION, "EOPNOTSUPP");
}

int main(void)
{
	test_hdr_codec();
	test_conn_roundtrip();
	test_bit_flips();
	test_seq();
	test_truncated();
	test_over_cap();
	test_silent_peer();
	test_error_msg();
	test_err_map();
	TEST_EXIT();
}
