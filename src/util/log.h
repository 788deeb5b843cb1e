/* Provider logging: to stderr, never stdout (a library is a guest in its host process).
 * The level comes from SoftNdkOpenAdapter options or SOFTNDK_LOG; the most verbose level
 * asked for by any open adapter wins, since the log is process-wide. */
#ifndef SOFTNDK_UTIL_LOG_H
#define SOFTNDK_UTIL_LOG_H

#include <stdbool.h>

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

#endif
