#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include "include/CProxyLinux.h"

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

int CProxyLinux_udp_options(int fd, int family) {
    int one = 1, got = 0;
    if (family == AF_INET6) {
        if (setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one) == 0) got |= CProxyLinux_UDP_PKTINFO;
        if (setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one) == 0) got |= CProxyLinux_UDP_ECN;
    }
    // On an IPv6 socket too: IPv4 clients of a dual-stack socket arrive with SOL_IP messages.
    if (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) == 0) got |= CProxyLinux_UDP_PKTINFO;
    if (setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) == 0) got |= CProxyLinux_UDP_ECN;
    if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) == 0) got |= CProxyLinux_UDP_GRO;
    // Linux since 2.6.33: each datagram says how many the kernel had dropped (`dropped` below).
    setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
    return got;
}

long CProxyLinux_recv_datagrams(int fd, void *buf, size_t len, struct sockaddr_storage *from, socklen_t *fromlen,
                                struct sockaddr_storage *to, uint8_t *ecn, int *segment, uint32_t *dropped) {
    struct iovec iov = { buf, len };
    union { char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int)) * 2 + CMSG_SPACE(sizeof(uint32_t))];
            struct cmsghdr align; } control;
    struct msghdr msg = { .msg_name = from, .msg_namelen = sizeof *from, .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n < 0) return -1;
    *fromlen = msg.msg_namelen;
    to->ss_family = AF_UNSPEC;
    *ecn = 0;
    *segment = 0;
    *dropped = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo info;
            memcpy(&info, CMSG_DATA(c), sizeof info);
            if (from->ss_family == AF_INET6) {
                // An IPv4 client of a dual-stack socket: its addresses are IPv4-mapped.
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)to;
                memset(a, 0, sizeof *a);
                a->sin6_family = AF_INET6;
                a->sin6_addr.s6_addr[10] = 0xff;
                a->sin6_addr.s6_addr[11] = 0xff;
                memcpy(&a->sin6_addr.s6_addr[12], &info.ipi_addr, 4);
            } else {
                struct sockaddr_in *a = (struct sockaddr_in *)to;
                memset(a, 0, sizeof *a);
                a->sin_family = AF_INET;
                a->sin_addr = info.ipi_addr;
            }
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            struct in6_pktinfo info;
            memcpy(&info, CMSG_DATA(c), sizeof info);
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)to;
            memset(a, 0, sizeof *a);
            a->sin6_family = AF_INET6;
            a->sin6_addr = info.ipi6_addr;
        } else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
                   (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
            // IP_TOS arrives as one byte, IPV6_TCLASS as an int.
            *ecn = (c->cmsg_type == IP_TOS ? *(uint8_t *)CMSG_DATA(c) : (uint8_t) * (int *)CMSG_DATA(c)) & IPTOS_ECN_MASK;
        } else if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
            int size;
            memcpy(&size, CMSG_DATA(c), sizeof size);
            *segment = size;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
            memcpy(dropped, CMSG_DATA(c), sizeof *dropped);
        }
    }
    return (long)n;
}

long CProxyLinux_send_datagrams(int fd, const void *buf, size_t len, uint16_t segment, const struct sockaddr *to,
                                socklen_t tolen, const struct sockaddr *from, uint8_t ecn) {
    struct iovec iov = { (void *)buf, len };
    union { char buf[CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
            struct cmsghdr align; } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    size_t used = 0;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (segment) {
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        memcpy(CMSG_DATA(c), &segment, sizeof segment);
        used += CMSG_SPACE(sizeof(uint16_t));
        c = (struct cmsghdr *)(control.buf + used);
    }
    // Towards an IPv4 client (a dual-stack socket's IPv4-mapped ones too) the SOL_IP messages
    // apply; towards an IPv6 one the SOL_IPV6 ones.
    int v4 = to->sa_family == AF_INET ||
             (to->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)to)->sin6_addr));
    if (from) {
        if (v4) {
            struct in_pktinfo info;
            memset(&info, 0, sizeof info);
            if (from->sa_family == AF_INET) info.ipi_spec_dst = ((const struct sockaddr_in *)from)->sin_addr;
            else memcpy(&info.ipi_spec_dst, &((const struct sockaddr_in6 *)from)->sin6_addr.s6_addr[12], 4);
            c->cmsg_level = IPPROTO_IP;
            c->cmsg_type = IP_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof info);
            memcpy(CMSG_DATA(c), &info, sizeof info);
            used += CMSG_SPACE(sizeof info);
        } else {
            struct in6_pktinfo info;
            memset(&info, 0, sizeof info);
            info.ipi6_addr = ((const struct sockaddr_in6 *)from)->sin6_addr;
            c->cmsg_level = IPPROTO_IPV6;
            c->cmsg_type = IPV6_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof info);
            memcpy(CMSG_DATA(c), &info, sizeof info);
            used += CMSG_SPACE(sizeof info);
        }
        c = (struct cmsghdr *)(control.buf + used);
    }
    if (ecn) {
        int tos = ecn;
        c->cmsg_level = v4 ? IPPROTO_IP : IPPROTO_IPV6;
        c->cmsg_type = v4 ? IP_TOS : IPV6_TCLASS;
        c->cmsg_len = CMSG_LEN(sizeof tos);
        memcpy(CMSG_DATA(c), &tos, sizeof tos);
        used += CMSG_SPACE(sizeof tos);
    }
    msg.msg_controllen = used;
    if (used == 0) msg.msg_control = NULL;
    return (long)sendmsg(fd, &msg, MSG_NOSIGNAL);
}
