/* From a member back to the structure that embeds it: every layer hands out pointers to
 * members (a work item, an event source, an object's base) and gets them back in callbacks. */
#ifndef SOFTNDK_UTIL_CONTAINER_H
#define SOFTNDK_UTIL_CONTAINER_H

#include <stddef.h>

/* Through void *: the member pointer came from an object of `type`, so the result is aligned
 * (clang's -Wcast-align cannot know that from a char pointer). */
#define sndk_container_of(ptr, type, member)                                                       \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#endif
