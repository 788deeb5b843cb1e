/* Provider logging: to stderr, never stdout (a library is a guest in its host process).
 * The level comes from SoftNdkOpenAdapter options or SOFTNDK_LOG; the most verbose level
 * asked for by any open adapter wins, since the log is process-wide. */
#ifndef SOFTNDK_UTIL_LOG_H
#define SOFTNDK_UTIL_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum sndk_log_level {
    SNDK_LOG_ERROR = 0,
    SNDK_LOG_WARN = 1,
    SNDK_LOG_INFO = 2,
    SNDK_LOG_DEBUG = 3,
};

void sndk_log_set_level(enum sndk_log_level level);
enum sndk_log_level sndk_log_get_level(void);
bool sndk_log_enabled(enum sndk_log_level level);
void sndk_log_write(enum sndk_log_level level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define sndk_log(level, subsys, ...)                                                               \
    do {                                                                                           \
        if (sndk_log_enabled(level))                                                               \
            sndk_log_write(level, subsys, __VA_ARGS__);                                            \
    } while (0)
#define sndk_err(subsys, ...)   sndk_log(SNDK_LOG_ERROR, subsys, __VA_ARGS__)
#define sndk_warn(subsys, ...)  sndk_log(SNDK_LOG_WARN, subsys, __VA_ARGS__)
#define sndk_info(subsys, ...)  sndk_log(SNDK_LOG_INFO, subsys, __VA_ARGS__)
#define sndk_debug(subsys, ...) sndk_log(SNDK_LOG_DEBUG, subsys, __VA_ARGS__)

/* A line a remote peer can repeat at will (once per connection it opens, per frame it sends):
 * written at most once a second per call site, the others left out and counted, in
 * *suppressed_ctr (an adapter's LogLinesSuppressed, or NULL) and in the next line written,
 * which ends "(N similar lines suppressed)" (docs/observability.md, "Logs"). Error, warn and
 * info lines on a peer's path all go through here; debug lines are per event by design. */
#define SNDK_LOG_PEER_EVERY_US 1000000u

struct sndk_log_limit {
    _Atomic uint64_t next_us;    /* CLOCK_MONOTONIC µs before which the site stays quiet */
    _Atomic uint64_t suppressed; /* lines left out since the last one written */
};

void sndk_log_limited(struct sndk_log_limit *lim, _Atomic uint64_t *suppressed_ctr,
                      enum sndk_log_level level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define sndk_log_peer(level, ctr, subsys, ...)                                                     \
    do {                                                                                           \
        static struct sndk_log_limit sndk_log_site_;                                               \
        if (sndk_log_enabled(level))                                                               \
            sndk_log_limited(&sndk_log_site_, ctr, level, subsys, __VA_ARGS__);                    \
    } while (0)
#define sndk_warn_peer(ctr, subsys, ...) sndk_log_peer(SNDK_LOG_WARN, ctr, subsys, __VA_ARGS__)
#define sndk_info_peer(ctr, subsys, ...) sndk_log_peer(SNDK_LOG_INFO, ctr, subsys, __VA_ARGS__)

#endif
