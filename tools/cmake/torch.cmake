# Finds the LibTorch that ships inside PyPI's `torch` wheel and wraps it in pipelab::torch.
#
# The wheel is CUDA-enabled: libtorch_cuda.so needs CUDA, cuDNN and NCCL libraries that the
# wheel's nvidia-* dependencies install under site-packages/nvidia/*/lib. The linker must
# resolve them there (not in a system CUDA toolkit with an older NCCL), and at run time
# they must come first too, hence -rpath-link and a BUILD_RPATH that lists them.
if(NOT Torch_DIR AND NOT DEFINED ENV{Torch_DIR})
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c
                    "import torch; print(torch.utils.cmake_prefix_path)"
                    OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET)
    if(_torch_prefix)
      list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
    endif()
  endif()
endif()
find_package(Torch REQUIRED)

# site-packages/torch/share/cmake/Torch -> site-packages
get_filename_component(_site "${Torch_DIR}/../../../.." ABSOLUTE)
file(GLOB PIPELAB_TORCH_RUNTIME_DIRS LIST_DIRECTORIES true "${_site}/nvidia/*/lib")

add_library(pipelab_torch INTERFACE)
add_library(pipelab::torch ALIAS pipelab_torch)
# Some LibTorch wheels (2.11 among them) export std::filesystem functions of the toolchain
# that built them from libtorch.so; when libtorch.so comes before libstdc++.so in a
# program's library order, those copies win and std::filesystem::remove_all crashes. The
# system libstdc++ is therefore named first.
target_link_libraries(pipelab_torch INTERFACE "-Wl,--push-state,--no-as-needed,-lstdc++,--pop-state" ${TORCH_LIBRARIES})
foreach(_dir IN LISTS PIPELAB_TORCH_RUNTIME_DIRS)
  target_link_options(pipelab_torch INTERFACE "-Wl,-rpath-link,${_dir}")
endforeach()
set(CMAKE_BUILD_RPATH "${PIPELAB_TORCH_RUNTIME_DIRS}")

# CUDA-specific code is compiled only where LibTorch itself was built with CUDA
# (core/device/cuda.h is the one place that looks at this).
if(TORCH_CUDA_LIBRARIES OR TARGET torch_cuda OR CAFFE2_USE_CUDA)
  set(PIPELAB_WITH_CUDA ON)
else()
  set(PIPELAB_WITH_CUDA OFF)
endif()
message(STATUS "pipelab: LibTorch ${Torch_VERSION} at ${Torch_DIR}, CUDA paths: ${PIPELAB_WITH_CUDA}")
