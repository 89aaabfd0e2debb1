// CLibUV: the system libuv (pkg-config libuv, Debian libuv1-dev) seen from Swift.
// The inline helpers below convert between libuv's handle "subclasses" (C does that with a
// cast, Swift cannot name the cast directly), and call what Swift cannot (variadic prctl).
#ifndef DECIDE_CLIBUV_SHIM_H
#define DECIDE_CLIBUV_SHIM_H

#include <uv.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>

static inline uv_handle_t *decide_uv_tcp_as_handle(uv_tcp_t *tcp) { return (uv_handle_t *)tcp; }
static inline uv_stream_t *decide_uv_tcp_as_stream(uv_tcp_t *tcp) { return (uv_stream_t *)tcp; }
static inline uv_tcp_t *decide_uv_stream_as_tcp(uv_stream_t *stream) { return (uv_tcp_t *)stream; }
static inline uv_handle_t *decide_uv_stream_as_handle(uv_stream_t *stream) { return (uv_handle_t *)stream; }
static inline uv_stream_t *decide_uv_pipe_as_stream(uv_pipe_t *pipe) { return (uv_stream_t *)pipe; }
static inline uv_handle_t *decide_uv_pipe_as_handle(uv_pipe_t *pipe) { return (uv_handle_t *)pipe; }
static inline uv_handle_t *decide_uv_timer_as_handle(uv_timer_t *timer) { return (uv_handle_t *)timer; }
static inline uv_handle_t *decide_uv_check_as_handle(uv_check_t *check) { return (uv_handle_t *)check; }
static inline uv_handle_t *decide_uv_async_as_handle(uv_async_t *async) { return (uv_handle_t *)async; }
static inline uv_handle_t *decide_uv_poll_as_handle(uv_poll_t *poll) { return (uv_handle_t *)poll; }
static inline const struct sockaddr *decide_sockaddr_storage_as_sockaddr(const struct sockaddr_storage *s) {
    return (const struct sockaddr *)s;
}
static inline struct sockaddr *decide_sockaddr_storage_as_mutable_sockaddr(struct sockaddr_storage *s) {
    return (struct sockaddr *)s;
}
static inline const struct sockaddr_in *decide_sockaddr_as_in(const struct sockaddr *s) {
    return (const struct sockaddr_in *)s;
}
static inline const struct sockaddr_in6 *decide_sockaddr_as_in6(const struct sockaddr *s) {
    return (const struct sockaddr_in6 *)s;
}

/// Sets the calling thread's timer slack: how much later than asked the kernel may end its
/// sleeps and timeouts (50 µs by default, to batch wakeups). Returns prctl's result.
static inline int decide_set_timer_slack_nanoseconds(unsigned long nanoseconds) {
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0UL, 0UL, 0UL);
}

#endif
