# The CUDA backend's library, libfleetsim_cuda.so beside the fleetsim binary (realexec/include/fleetsim/
# cuda_plugin.hpp): the CUDA replay and calibration, with cuBLAS, NCCL and the kernels. It links none of
# fleetsim's own libraries: their symbols come from the executable that opens it (ENABLE_EXPORTS).
add_library(fleetsim_cuda MODULE
  ${PROJECT_SOURCE_DIR}/realexec/src/cuda_backend.cpp
  ${PROJECT_SOURCE_DIR}/calibrate/src/calibrate_cuda.cpp
  # The GPU-free half of the CUDA calibration is in fleetsim_calibrate too, for its tests; the fleetsim
  # binary uses none of it, so its linker leaves it out.
  ${PROJECT_SOURCE_DIR}/calibrate/src/fit_cuda.cpp)
target_include_directories(fleetsim_cuda PRIVATE
  ${PROJECT_SOURCE_DIR}/sim/include
  ${PROJECT_SOURCE_DIR}/realexec/include ${PROJECT_SOURCE_DIR}/realexec/src
  ${PROJECT_SOURCE_DIR}/calibrate/include ${PROJECT_SOURCE_DIR}/calibrate/src)
target_link_libraries(fleetsim_cuda PRIVATE fleetsim_kernels CUDA::cudart CUDA::cublas)
if(FLEETSIM_HAVE_NCCL)
  target_link_libraries(fleetsim_cuda PRIVATE fleetsim_nccl)
  target_compile_definitions(fleetsim_cuda PRIVATE FLEETSIM_HAVE_NCCL=1)
  # NCCL communicators of gangs that span MPI ranks (MPI as found for the planner, top-level CMakeLists).
  if(MPI_CXX_FOUND)
    target_sources(fleetsim_cuda PRIVATE ${PROJECT_SOURCE_DIR}/realexec/src/cuda_ranks.cpp)
    target_link_libraries(fleetsim_cuda PRIVATE MPI::MPI_CXX)
    target_compile_definitions(fleetsim_cuda PRIVATE FLEETSIM_NCCL_OVER_MPI=1)
  endif()
endif()
set_target_properties(fleetsim_cuda PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
