/* SPDX-License-Identifier: MIT */
/*
 * UNIX stream sockets of the control interfaces (the godwit API, QMP):
 * listening (mode 0600, a stale socket replaced, a live one or another
 * kind of file refused), accepting, removing only our own socket file, and
 * connecting. One place for what both sockets must do alike.
 */
#ifndef GW_CLI_USOCK_H
#define GW_CLI_USOCK_H

#include <stddef.h>
#include <sys/types.h>

/* The identity of the socket file we bound, so that we never unlink a successor's. */
struct usock_id {
	dev_t dev;
	ino_t ino;
};

/*
 * A listening socket at @path (backlog 16, close-on-exec). The file is
 * created mode 0600: only our user may drive the VM. Returns the fd, or
 * -errno with a reason in @err (-EADDRINUSE: a live server is there;
 * -EEXIST: not a socket; -ENAMETOOLONG).
 */
int usock_listen(const char *path, struct usock_id *id, char *err, size_t err_len);
/* Remove @path if it is still the socket usock_listen made. */
void usock_unlisten(const char *path, const struct usock_id *id);
/* A client connection from @listen_fd (close-on-exec), or -errno. */
int usock_accept(int listen_fd);
/*
 * Only this user (or root) may drive the VM. The socket file is 0600 and
 * that alone keeps others out; the kernel's word on who connected
 * (SO_PEERCRED) is checked too, in case the file's mode or directory was
 * changed. 0, or -EACCES with the reason in @why (logged: api_refused).
 */
int usock_peer_check(int fd, char *why, size_t why_len);
/* Connect to @path: the fd, or -errno (-ENOENT, -ECONNREFUSED, -ENAMETOOLONG). */
int usock_connect(const char *path);

#endif
