# SPDX-License-Identifier: MIT
# find_package(mori) for CMake: the imported target mori::mori (libmori.so
# and the public headers). Relocatable: paths are relative to this file
# (<prefix>/lib/cmake/mori/).
get_filename_component(_mori_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET mori::mori)
  add_library(mori::mori SHARED IMPORTED)
  set_target_properties(mori::mori PROPERTIES
    IMPORTED_LOCATION "${_mori_prefix}/lib/libmori.so"
    IMPORTED_SONAME "libmori.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_mori_prefix}/include")
endif()

foreach(_mori_file "${_mori_prefix}/lib/libmori.so" "${_mori_prefix}/include/mori/version.h")
  if(NOT EXISTS "${_mori_file}")
    set(mori_FOUND FALSE)
    set(mori_NOT_FOUND_MESSAGE "mori's install tree at ${_mori_prefix} lacks ${_mori_file}")
  endif()
endforeach()
set(mori_PREFIX "${_mori_prefix}")
unset(_mori_file)
unset(_mori_prefix)
