// A checked MPI call: a failure throws DeviceError naming where, the call and MPI's error string.
#pragma once

#include <mpi.h>

#include <string>

#include "fleetsim/realexec.hpp"

namespace fleetsim::ranks {

inline void check_mpi(int code, const char* call, const std::string& where) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw DeviceError(where + ": " + call + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace fleetsim::ranks

#define FLEETSIM_MPI(where, call) ::fleetsim::ranks::check_mpi((call), #call, (where))
