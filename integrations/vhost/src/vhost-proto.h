/* SPDX-License-Identifier: MIT */
/*
 * vhost-proto.h - the vhost-user wire protocol and the virtio feature bits
 * the library speaks: request codes, header flags, size limits.  Private
 * to the library and its tests (their frontend, tests/vfe.c, speaks the
 * same protocol); a device needs none of it (aioloop/vhost.h).
 */
#ifndef AIOLOOP_VHOST_PROTO_H
#define AIOLOOP_VHOST_PROTO_H

/** vhost-user request codes the library serves (frontend -> backend). */
enum aiol__vhost_request {
    AIOL__VHOST_GET_FEATURES = 1,
    AIOL__VHOST_SET_FEATURES = 2,
    AIOL__VHOST_SET_OWNER = 3,
    AIOL__VHOST_RESET_OWNER = 4,
    AIOL__VHOST_SET_MEM_TABLE = 5,
    AIOL__VHOST_SET_VRING_NUM = 8,
    AIOL__VHOST_SET_VRING_ADDR = 9,
    AIOL__VHOST_SET_VRING_BASE = 10,
    AIOL__VHOST_GET_VRING_BASE = 11,
    AIOL__VHOST_SET_VRING_KICK = 12,
    AIOL__VHOST_SET_VRING_CALL = 13,
    AIOL__VHOST_SET_VRING_ERR = 14,
    AIOL__VHOST_GET_PROTOCOL_FEATURES = 15,
    AIOL__VHOST_SET_PROTOCOL_FEATURES = 16,
    AIOL__VHOST_GET_QUEUE_NUM = 17,
    AIOL__VHOST_SET_VRING_ENABLE = 18,
    AIOL__VHOST_GET_CONFIG = 24,
    AIOL__VHOST_SET_CONFIG = 25,
};

/** @{ */
/** Header flags: protocol version (1), reply, need_reply. */
#define AIOL__VHOST_FLAG_VERSION 0x1u
#define AIOL__VHOST_FLAG_VERSION_MASK 0x3u
#define AIOL__VHOST_FLAG_REPLY (1u << 2)
#define AIOL__VHOST_FLAG_NEED_REPLY (1u << 3)
/** @} */

/** Size of a message header (request, flags, size: three u32). */
#define AIOL__VHOST_HDR_SIZE 12u
/** Largest payload accepted; a larger size field drops the connection. */
#define AIOL__VHOST_PAYLOAD_MAX 512u
/** Most fds one message may carry (and memory regions in a table). */
#define AIOL__VHOST_MAX_FDS 8u
/** Largest config space GET_CONFIG/SET_CONFIG may move. */
#define AIOL__VHOST_CONFIG_MAX 256u
/** Most queues a device may have. */
#define AIOL__VHOST_MAX_QUEUES 64u
/** Largest ring size (virtio 1.x; split rings: a power of 2). */
#define AIOL__VHOST_MAX_RING 32768u

/** @{ */
/** In SET_VRING_KICK/CALL/ERR's u64: low byte is the index, this bit "no fd". */
#define AIOL__VHOST_VRING_IDX_MASK 0xffu
#define AIOL__VHOST_VRING_NOFD_MASK (1u << 8)
/** @} */

/** @{ */
/** Protocol feature bits (GET/SET_PROTOCOL_FEATURES). */
#define AIOL__VHOST_PROTOCOL_F_MQ 0
#define AIOL__VHOST_PROTOCOL_F_REPLY_ACK 3
#define AIOL__VHOST_PROTOCOL_F_CONFIG 9
/** @} */

/** @{ */
/** Virtio feature bits the library itself handles or offers. */
#define AIOL__VHOST_F_RING_INDIRECT_DESC 28
#define AIOL__VHOST_F_RING_EVENT_IDX 29
#define AIOL__VHOST_F_PROTOCOL_FEATURES 30
#define AIOL__VHOST_F_VERSION_1 32
#define AIOL__VHOST_F_RING_PACKED 34
/** @} */

#endif /* AIOLOOP_VHOST_PROTO_H */
