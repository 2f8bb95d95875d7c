// SPDX-License-Identifier: MIT
/* Teams as arithmetic: {start, stride, size, rank}. World rank of team index
 * i is start + i * stride. The same inline functions run in kernels and on
 * the host. */
#ifndef MORI_DEVICE_TEAM_H
#define MORI_DEVICE_TEAM_H

#include "mori/device/portability.h"

typedef struct mori_team {
  int32_t start;  /* world rank of index 0, >= 0 */
  int32_t stride; /* >= 1 */
  int32_t size;   /* 0 after mori_team_destroy */
  int32_t rank;   /* this rank's index, or -1 when not a member */
} mori_team_t;

MORI_STATIC_ASSERT(sizeof(mori_team_t) == 16, "mori_team_t is four int32");

/* Teams are plain values that callers may fill by hand (or destroy), so
 * the functions below treat a start below 0, a stride below 1 or a size
 * below 1 as a team without members instead of dividing by it or
 * overflowing: a few compares, no trap on the host, no garbage in a
 * kernel. */

MORI_HOST_DEVICE int mori_team_rank(mori_team_t t) { return t.rank; }
MORI_HOST_DEVICE int mori_team_size(mori_team_t t) { return t.size; }

/* World rank of team index `index` (-1 when out of range). */
MORI_HOST_DEVICE int mori_team_to_world(mori_team_t t, int index) {
  if (t.start < 0 || t.stride < 1 || index < 0 || index >= t.size) return -1;
  long long world = (long long)t.start + (long long)index * t.stride; /* 64-bit: no overflow */
  return world <= 2147483647LL ? (int)world : -1;
}

/* Team index of world rank `world` (-1 when not a member). */
MORI_HOST_DEVICE int mori_team_from_world(mori_team_t t, int world) {
  /* world < start before the subtraction: world - start cannot overflow
   * (start >= 0 in a sound team) even for world near INT_MIN. */
  if (t.start < 0 || t.stride < 1 || world < t.start) return -1;
  int d = world - t.start;
  if (d % t.stride) return -1;
  int index = d / t.stride;
  return index < t.size ? index : -1;
}

MORI_HOST_DEVICE int mori_team_is_member(mori_team_t t, int world) { return mori_team_from_world(t, world) >= 0; }

/* Index in `to` of index `index` of `from`, or -1. */
MORI_HOST_DEVICE int mori_team_translate(mori_team_t from, int index, mori_team_t to) {
  int world = mori_team_to_world(from, index);
  return world < 0 ? -1 : mori_team_from_world(to, world);
}

#endif
