// Linux interfaces that Swift's Glibc module does not export.
// No _GNU_SOURCE here: it conflicts with the Glibc module, so the few GNU
// functions are declared by hand with their documented prototypes.
#ifndef CPROXYLINUX_H
#define CPROXYLINUX_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <signal.h>
#include <stdint.h>

// accept4(2) is a GNU extension hidden without _GNU_SOURCE.
int CProxyLinux_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

// splice(2) between a socket and a pipe, non-blocking (SPLICE_F_NONBLOCK | SPLICE_F_MOVE):
// bytes moved, 0 at the input's end, -1 with errno.
long CProxyLinux_splice(int in, int out, size_t len);
// The same into a socket with SPLICE_F_MORE: more follows at once, so TCP holds a partial
// segment back as MSG_MORE does.
long CProxyLinux_splice_more(int in, int out, size_t len);
// A non-blocking, close-on-exec pipe (pipe2(2)); fds[0] reads, fds[1] writes. 0, or -1 with errno.
int CProxyLinux_pipe(int fds[2]);
// The pipe's capacity in bytes (F_GETPIPE_SZ), or -1.
int CProxyLinux_pipe_size(int fd);

// Static files (`Sources/ProxyCore/Static/`). openat2(2) has no glibc wrapper and syscall(2) is
// variadic: `path` (relative) under the directory `dirfd`, read-only, close-on-exec, non-blocking
// (a FIFO must not hold the loop), never through /proc's magic links; `beneath`: every component
// stays under `dirfd` (RESOLVE_BENEATH: a symlink out of it, or an absolute one, fails with EXDEV).
// The descriptor, or -1 with errno.
int CProxyLinux_open_beneath(int dirfd, const char *path, int beneath);
// A directory opened for openat2's `dirfd` alone (O_PATH | O_DIRECTORY needs _GNU_SOURCE).
int CProxyLinux_open_directory(const char *path);
// sendfile(2) (sys/sendfile.h is not in Swift's Glibc module): up to `count` bytes of `in` from
// `*offset` (advanced) to the socket `out`. Bytes sent, or -1 with errno.
long CProxyLinux_sendfile(int out, int in, int64_t *offset, size_t count);
// QUIC's UDP (UDP.c). What `CProxyLinux_udp_options` turned on, as bits: the address each
// datagram was sent to (IP_PKTINFO / IPV6_RECVPKTINFO: a wildcard socket answers from it), its
// ECN bits (IP_RECVTOS / IPV6_RECVTCLASS), and datagrams coalesced by the kernel (UDP_GRO). It
// also asks for the count of datagrams the kernel dropped with the receive buffer full
// (SO_RXQ_OVFL), which every Linux since 2.6.33 gives.
static const int CProxyLinux_UDP_PKTINFO = 1;
static const int CProxyLinux_UDP_ECN = 2;
static const int CProxyLinux_UDP_GRO = 4;
int CProxyLinux_udp_options(int fd, int family);
// One recvmsg: bytes received (several datagrams of `*segment` bytes each, the last maybe
// shorter, when the kernel coalesced them; `*segment` 0: one datagram), or -1 with errno. `to`:
// the address it was sent to, port unset (AF_UNSPEC when the kernel did not say); `ecn`: its ECN
// bits; `dropped`: how many datagrams the kernel had dropped on this socket, its receive buffer
// full, when this one was queued (SO_RXQ_OVFL: a running count, 0 while there were none).
long CProxyLinux_recv_datagrams(int fd, void *buf, size_t len, struct sockaddr_storage *from, socklen_t *fromlen,
                                struct sockaddr_storage *to, uint8_t *ecn, int *segment, uint32_t *dropped);
// One sendmsg of `len` bytes: datagrams of `segment` bytes with UDP GSO (Linux 4.18+; 0: one
// datagram; EIO or EINVAL where the route's device cannot segment: send them one by one), from the
// address `from` when not NULL (IP_PKTINFO / IPV6_PKTINFO: a wildcard socket's reply leaves from
// the address the client reached), with the ECN bits `ecn` (0: none). Bytes sent, or -1 with errno.
long CProxyLinux_send_datagrams(int fd, const void *buf, size_t len, uint16_t segment, const struct sockaddr *to,
                                socklen_t tolen, const struct sockaddr *from, uint8_t ecn);
// SOCK_NONBLOCK / SOCK_CLOEXEC are enum members in glibc's headers that Swift
// imports awkwardly; re-export them as plain ints.
static const int CProxyLinux_SOCK_NONBLOCK = SOCK_NONBLOCK;
static const int CProxyLinux_SOCK_CLOEXEC = SOCK_CLOEXEC;
// The socket types too: imported as members of glibc's `__socket_type`, they vanish from
// Glibc's scope in a whole-module build once a system module (CNghttp3, CNgtcp2) has pulled in
// <sys/socket.h> first and owns the enum.
static const int CProxyLinux_SOCK_STREAM = SOCK_STREAM;
static const int CProxyLinux_SOCK_DGRAM = SOCK_DGRAM;
static const uint32_t CProxyLinux_EPOLLIN = EPOLLIN;
static const uint32_t CProxyLinux_EPOLLOUT = EPOLLOUT;
static const uint32_t CProxyLinux_EPOLLERR = EPOLLERR;
static const uint32_t CProxyLinux_EPOLLHUP = EPOLLHUP;
static const uint32_t CProxyLinux_EPOLLRDHUP = EPOLLRDHUP;

// errno is a macro over a thread-local; a function is the portable way to read it.
int CProxyLinux_errno(void);

// pthread_sigmask on the calling thread's signal mask, with a set built from a list.
int CProxyLinux_block_signals(const int *signals, int count);
// Waits for one of the given signals (sigwait(3)); returns the signal number.
int CProxyLinux_wait_signals(const int *signals, int count);

// glibc's allocator controls (malloc.h is not in Swift's Glibc module): see HeapHousekeeping.
// Arena cap (M_ARENA_MAX); 0 when it could not be set.
int CProxyLinux_limit_arenas(int arenas);
// malloc_trim(0): 1 when memory was given back.
int CProxyLinux_trim_heap(void);
// mallinfo2(): bytes in use (including mmapped chunks) and bytes free but held.
void CProxyLinux_heap(size_t *in_use, size_t *held_free);

#endif
