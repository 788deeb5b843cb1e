/* inaddr.h — softndk kernel-consumer harness: IN_ADDR / IN6_ADDR are in ws2def.h. */
#include "ws2def.h"
