// SPDX-License-Identifier: MIT
/* The mori device API, for HIP, CUDA and plain C (CPU ranks on the host
 * platform): window addressing, put/get, signals, barriers. Team queries
 * come with the teams package (mori/device/team.h). */
#ifndef MORI_DEVICE_H
#define MORI_DEVICE_H

#include "mori/device/barrier.h"
#include "mori/device/put.h"
#include "mori/device/remote_sync.h"
#include "mori/device/signal.h"
#include "mori/device/window.h"

#endif
