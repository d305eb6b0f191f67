# LOOM_CUDA=AUTO|ON|OFF: finds nvcc (on PATH, or /usr/local/cuda/bin/nvcc)
# and the CUDA toolkit, enables the CUDA language and sets LOOM_CUDA_BUILT.
# Included from the top-level CMakeLists.txt: CMake wants a language enabled
# in the directory that holds every target compiling or linking it, and every
# executable links libloom. backends/cuda/CMakeLists.txt adds the sources.
set(LOOM_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc and the toolkit are found), ON or OFF")
set_property(CACHE LOOM_CUDA PROPERTY STRINGS AUTO ON OFF)
option(LOOM_CUDA_PLUGIN "Build the CUDA backend as a plugin loaded at run time" OFF)
set(LOOM_CUDA_BUILT OFF)

string(TOUPPER "${LOOM_CUDA}" loom_cuda_mode)
if(loom_cuda_mode MATCHES "^(OFF|FALSE|NO|0)$")
  message(STATUS "CUDA backend: off (LOOM_CUDA=${LOOM_CUDA})")
  return()
endif()
if(NOT loom_cuda_mode MATCHES "^(AUTO|ON|TRUE|YES|1)$")
  message(FATAL_ERROR "LOOM_CUDA must be AUTO, ON or OFF (it is '${LOOM_CUDA}')")
endif()

# nvcc: CUDACXX or CMAKE_CUDA_COMPILER if given, else on PATH, else where the
# CUDA packages install it.
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  find_program(LOOM_NVCC_ON_PATH nvcc)
  if(NOT LOOM_NVCC_ON_PATH)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
endif()
# sm_80 and sm_90 machine code, plus sm_90 PTX for newer GPUs (before
# check_language, which would otherwise pick nvcc's default).
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual" CACHE STRING "CUDA architectures")
endif()
check_language(CUDA)
set(loom_cuda_missing "")
if(NOT CMAKE_CUDA_COMPILER)
  set(loom_cuda_missing "no CUDA compiler (nvcc) was found; install the CUDA toolkit or set CMAKE_CUDA_COMPILER")
else()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart_static OR NOT TARGET CUDA::cublas)
    set(loom_cuda_missing "nvcc is ${CMAKE_CUDA_COMPILER} but the CUDA toolkit (cudart, cuBLAS) was not found")
  endif()
endif()
if(loom_cuda_missing)
  if(loom_cuda_mode STREQUAL "AUTO")
    message(STATUS "CUDA backend: not built (${loom_cuda_missing})")
    return()
  endif()
  message(FATAL_ERROR "LOOM_CUDA is ON but ${loom_cuda_missing}")
endif()

enable_language(CUDA)
# C++20 for nvcc: CMake before 3.26 does not know nvcc's CUDA20 dialect (nvcc
# has taken -std=c++20 since 12.0), and libloom's C++20 carries over to CUDA.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(LOOM_CUDA_BUILT ON)
message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}), architectures ${CMAKE_CUDA_ARCHITECTURES}")
